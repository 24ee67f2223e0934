"""Refuse a database that a newer moim has migrated.

An operator who rolls moim back after an upgrade would run old code on a schema it does not
know (columns it never fills, tables it never cleans); the older code used to open it without a
word. Both backends record each applied migration by name (`_moim_migrations`), so a name this
moim does not ship means a newer one wrote the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memory.errors import MigrationFailed


def refuse_newer(applied: Iterable[str], known: Sequence[str], shown: str) -> None:
    """Raise MigrationFailed, naming both schema versions and what to do, when `applied`
    holds a migration this moim does not know (`known`, in order); `shown` names the store."""
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise MigrationFailed(
            f"{shown} was upgraded by a newer moim: its schema is at {unknown[-1]}, this moim's "
            f"at {known[-1]}; upgrade moim again, or restore the backup taken before "
            "`moim migrate`"
        )
