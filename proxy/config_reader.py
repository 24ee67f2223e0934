"""Reading config.yaml's mappings while noting which keys moim asked for.

`proxy/config.py` reads every key it understands through `.get`, with a default when the key
is absent, so after a load each `Section` knows the keys moim takes at that place, and any
other key in the file is a mistake: a typo (`memory.placment`) or a key in the wrong section
(`memory.db`). Left alone, such a key is silently ignored and its setting silently not
applied; `auth.key:` for `auth.keys:` left a proxy open. `unknown_keys` names each one by its
path, with the nearest known key (difflib) or else the keys that place takes. Under `auth`, a
name with no near miss is not echoed: a proxy key pasted as a name would otherwise reach the
terminal and the logs.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


class Section(Mapping[str, Any]):
    """One mapping of the config file, at `path` (`""` for the top level, `auth.keys[0]`)."""

    def __init__(self, data: Mapping[Any, Any], path: str = "") -> None:
        self._data = data
        self.path = path
        self._asked: set[Any] = set()
        self._children: list[Section] = []

    def __getitem__(self, key: str) -> Any:
        self._asked.add(key)  # `.get`, `in` and `.items()` all come through here
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def child(self, data: Mapping[Any, Any], name: str) -> Section:
        """A mapping nested in this one, under `name` (`server`, `local`, `keys[0]`)."""
        section = Section(data, _join(self.path, name))
        self._children.append(section)
        return section

    def expect(self, *keys: str) -> None:
        """Declare keys as known without reading them (for a mapping another module reads)."""
        self._asked.update(keys)

    def known(self) -> list[str]:
        return sorted(str(key) for key in self._asked)

    def unknown(self) -> list[Any]:
        return [key for key in self._data if key not in self._asked]

    def walk(self) -> Iterator[Section]:
        yield self
        for child in self._children:
            yield from child.walk()


def unknown_keys(root: Section) -> list[str]:
    """One line per key in `root` and its children that nothing asked for, in file order."""
    sections = list(root.walk())
    known = [_join(section.path, key) for section in sections for key in section.known()]
    return [_explain(section, key, known) for section in sections for key in section.unknown()]


def _explain(section: Section, key: Any, known_paths: list[str]) -> str:
    """The unknown `key` of `section`: a near miss in the same place, or the same name elsewhere."""
    name, here = str(key), section.known()
    path = _join(section.path, name)
    close = difflib.get_close_matches(name, here, n=1)
    if close:
        return f"{path}: unknown key; did you mean {_join(section.path, close[0])}?"
    elsewhere = [known for known in known_paths if known.rsplit(".", 1)[-1] == name]
    if elsewhere:
        return f"{path}: unknown key; did you mean {elsewhere[0]}?"
    place = section.path or "the top level"
    takes = f"{place} takes: {', '.join(here)}"
    if section.path.split(".")[0] == "auth":
        return (
            f"{section.path}: an unknown key (its name is not shown: it may be a secret); {takes}"
        )
    return f"{path}: unknown key; {takes}"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key, `file` the file it is in."""

    file: Path | None = None  # set by load_config for what the YAML file said

    def shown(self) -> str:
        """The message, each line led by the file's path when the error is the file's."""
        if self.file is None:
            return str(self)
        return "\n".join(f"{self.file}: {line}" for line in str(self).splitlines())


# Settings whose value is a secret: a value of the wrong type is not echoed in the error.
_SECRET_SETTINGS = frozenset({"api_key", "secret"})


def typed(data: Mapping[str, Any], key: str, kind: type, default: Any, prefix: str = "") -> Any:
    """`data[key]` checked to be a `kind`, else `default` when absent; errors name `prefix`+key."""
    value = data.get(key)
    if value is None:
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, float) and math.isnan(value):  # YAML's .nan
        raise ConfigError(f"{prefix}{key}: expected a number, got .nan")
    if kind is int:
        return integer(value, prefix + key)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        shown = " (the value is not shown)" if key in _SECRET_SETTINGS else f", got {value!r}"
        raise ConfigError(f"{prefix}{key}: expected {kind.__name__}{shown}")
    return value


def integer(value: Any, key: str) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None


def http_url(value: str | None, key: str) -> str | None:
    """An http:// or https:// URL with a host (a provider's base URL), or None. The value is
    not echoed in the error: a URL may carry credentials."""
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{key}: must be an http:// or https:// URL with a host")
    return value


def at_least(
    data: Mapping[str, Any],
    prefix: str,
    key: str,
    default: int,
    low: int,
    high: int | None = None,
) -> int:
    """An integer setting within bounds; a value outside them names its key."""
    return within(typed(data, key, int, default, prefix), prefix + key, low, high)


def within(value: int, name: str, low: int, high: int | None = None) -> int:
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{name}: must be {bounds}, got {value!r}")
    return value


def above_zero(data: Mapping[str, Any], prefix: str, key: str, default: float) -> float:
    """A finite number of seconds (or minutes) above 0; anything else names its key."""
    return positive(typed(data, key, float, default, prefix), prefix + key)


def not_negative(data: Mapping[str, Any], prefix: str, key: str, default: float) -> float:
    """A finite number of seconds, 0 or more; anything else names its key."""
    value = typed(data, key, float, default, prefix)
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{prefix}{key}: must be 0 or more, got {value!r}")
    return float(value)


def seconds_from_env(text: str, name: str) -> float:
    """An environment variable's number of seconds, above 0; anything else names it."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of seconds, got {text!r}") from None
    return positive(value, name)


def positive(value: float, name: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}: must be above 0, got {value!r}")
    return value
