"""How many current facts one user may hold, checked in the transaction that adds one.

Set by the API, a tool, chat's capture, consolidation or an import, a new current fact goes
through `fact_rows`, which calls `check_room` before it is committed.
"""

from __future__ import annotations

from memory.store.database import Connection

# The most current facts a user may hold: each request reads them all for its block (100,000,
# one import's worth, took 1.5 s a request under the GIL every user needs; 1,000 ~30 ms).
MAX_CURRENT_FACTS = 1_000


class TooManyFacts(ValueError):
    """A new current fact for a user who holds `MAX_CURRENT_FACTS` already."""


def check_room(db: Connection, user_id: str, adding: int = 0) -> None:
    """TooManyFacts when `user_id` would hold over `MAX_CURRENT_FACTS` with `adding` more."""
    sql = "SELECT count(*) FROM facts WHERE user_id = ? AND status = 'active'"
    held = int(db.execute(sql, (user_id,)).fetchone()[0])
    if held + adding > MAX_CURRENT_FACTS:
        raise TooManyFacts(
            f"a user holds at most {MAX_CURRENT_FACTS} current facts (this one would hold "
            f"{held + adding}): forget some first"
        )
