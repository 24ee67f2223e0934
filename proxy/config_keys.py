"""Proxy keys from config: `auth.keys` (optionally bound to users), `auth.admin_keys`,
`auth.metrics_keys`, `auth.keys_file`, and MOIM_PROXY_KEYS / MOIM_PROXY_KEYS_FILE.

Each key is checked (no empty, short, spaced or non-ASCII key), errors name a key's position
and never its value, and one key with two meanings is refused rather than resolved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxy.config_reader import ConfigError, Section, typed

# Proxy keys shorter than this are refused: guessable, and "" would match a request with none.
MIN_KEY_LENGTH = 8
# A source of keys that holds none is refused: read as no keys, moim would answer anyone.
_NO_KEY = "without keys moim answers anyone; unset it to run without keys"


@dataclass(frozen=True, slots=True)
class ProxyKey:
    """A key clients present to moim; optionally bound to one user or a set of users.

    `users=()` means no list, i.e. any user; config refuses an empty `users:` so that it never
    comes to mean that by accident. A `metrics_only` key reads `/metrics` and nothing else.
    """

    key: str
    user_id: str | None = None
    users: tuple[str, ...] = ()
    admin: bool = False
    metrics_only: bool = False


def env_keys(keys: tuple[ProxyKey, ...], env: Mapping[str, str]) -> tuple[ProxyKey, ...]:
    """`keys` with the environment's unbound keys added (MOIM_PROXY_KEYS, comma-separated,
    and MOIM_PROXY_KEYS_FILE)."""
    listed = env.get("MOIM_PROXY_KEYS", "")
    extra = [
        ProxyKey(_key(key.strip(), f"MOIM_PROXY_KEYS item {number}"))
        for number, key in enumerate(listed.split(","), start=1)
        if key.strip()
    ]
    if listed and not extra:  # ',' from a template's empty list: set to hold keys, it holds none
        raise ConfigError(f"MOIM_PROXY_KEYS holds no key: {_NO_KEY}")
    if env.get("MOIM_PROXY_KEYS_FILE"):
        extra += _keys_file(env["MOIM_PROXY_KEYS_FILE"], "MOIM_PROXY_KEYS_FILE")
    return _unique([*keys, *extra])


def proxy_keys(auth: Section) -> tuple[ProxyKey, ...]:
    """`auth.keys`, `auth.admin_keys`, `auth.metrics_keys` and `auth.keys_file`.

    Each key is checked by `_key`, each `auth.keys` entry by `_key_entry`.
    """
    keys = []
    for index, item in enumerate(_list(auth, "keys")):
        where = f"auth.keys[{index}]"
        if isinstance(item, str):
            keys.append(ProxyKey(_key(item, where)))
        elif isinstance(item, Mapping) and isinstance(item.get("key"), str):
            keys.append(_key_entry(auth.child(item, f"keys[{index}]"), where))
        else:
            raise ConfigError(f"{where}: expected a mapping with a 'key' string")
    for index, key in enumerate(_list(auth, "admin_keys")):
        keys.append(ProxyKey(key=_key(key, f"auth.admin_keys[{index}]"), admin=True))
    for index, key in enumerate(_list(auth, "metrics_keys")):
        where = f"auth.metrics_keys[{index}]"
        keys.append(ProxyKey(key=_key(key, where), metrics_only=True))
    path = typed(auth, "keys_file", str, None, "auth.")
    if path is not None:
        keys.extend(_keys_file(path, "auth.keys_file"))
    return _unique(keys)


def _key_entry(entry: Section, where: str) -> ProxyKey:
    """One `auth.keys` mapping. Errors name the entry (`where`), never its key.

    Refused: an empty `users` list or user id (a key meant for some users must never end up
    acting for all of them), and fields that contradict each other, of which only one would
    take effect: `user_id` with `users`, and either with `admin: true`.
    """
    key = _key(entry["key"], where)
    user_id = typed(entry, "user_id", str, None, f"{where}.")
    if user_id is not None and not user_id.strip():
        raise ConfigError(f"{where}.user_id: the user id is empty")
    users = _users(entry, where)
    admin = typed(entry, "admin", bool, False, f"{where}.")
    if user_id is not None and users is not None:
        raise ConfigError(
            f"{where}: 'user_id' and 'users' contradict each other: "
            "a key is bound to one user or may act for a list of them, not both"
        )
    for name, given in (("user_id", user_id), ("users", users)):
        if admin and given is not None:
            raise ConfigError(
                f"{where}: '{name}' and 'admin: true' contradict each other: "
                "an admin key acts for any user"
            )
    return ProxyKey(key, user_id, users or (), admin)


def _users(entry: Section, where: str) -> tuple[str, ...] | None:
    """An entry's `users`: None when absent; present, it names at least one user."""
    if "users" not in entry:
        return None
    users = entry["users"]
    if users is None or users == []:
        raise ConfigError(
            f"{where}.users: the list is empty; name the users this key may act for, "
            "or leave 'users' out for a key that acts for any user"
        )
    if not isinstance(users, list) or not all(isinstance(user, str) for user in users):
        raise ConfigError(f"{where}.users: expected a list of user ids")
    for index, user in enumerate(users):
        if not user.strip():
            raise ConfigError(f"{where}.users[{index}]: the user id is empty")
    return tuple(users)


def _list(auth: Mapping[str, Any], name: str) -> list[Any]:
    value = auth.get(name) or []
    if not isinstance(value, list):
        raise ConfigError(f"auth.{name}: expected a list")
    return value


def _key(value: Any, where: str) -> str:
    """A proxy key, checked. Errors name the key's position (`where`), never its value.

    An empty key would let in a request that presents none, and a short one can be guessed.
    Clients' keys are stripped before comparison, so one with outer spaces could never match.
    """
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string")
    if not value.strip():
        raise ConfigError(f"{where}: the key is empty")
    if value != value.strip():
        raise ConfigError(f"{where}: the key starts or ends with whitespace")
    if not (value.isascii() and value.isprintable()):
        raise ConfigError(f"{where}: the key must be printable ASCII")
    if len(value) < MIN_KEY_LENGTH:
        raise ConfigError(f"{where}: the key is shorter than {MIN_KEY_LENGTH} characters")
    return value


def _keys_file(path: str, name: str) -> list[ProxyKey]:
    """Unbound keys from a file: one a line; blank lines and lines starting with `#` skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read {path}: {exc}") from exc
    keys = [
        ProxyKey(_key(line.strip(), f"{name} line {number}"))
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not keys:  # named to hold the keys: with none, moim would answer anyone
        raise ConfigError(f"{name}: {path} holds no key: {_NO_KEY}")
    return keys


def _unique(keys: list[ProxyKey]) -> tuple[ProxyKey, ...]:
    """The keys, repeats dropped; the same key with two meanings is refused.

    `authenticate` takes the last key that matches, so an unbound copy of a bound key would
    silently undo its binding. Positions count from 1 over auth.keys, auth.admin_keys, the
    keys file, then the environment.
    """
    seen: dict[str, tuple[int, ProxyKey]] = {}
    unique = []
    for number, key in enumerate(keys, start=1):
        if key.key not in seen:
            seen[key.key] = (number, key)
            unique.append(key)
        elif seen[key.key][1] != key:
            raise ConfigError(
                f"auth: proxy keys #{seen[key.key][0]} and #{number} are the same key "
                "with different users or rights"
            )
    return tuple(unique)
