"""A write-ahead journal of finished turns, so a crash never loses one.

A turn is appended here (one JSON line, an `os.write` on an O_APPEND descriptor: tens of
microseconds, no database, no fsync) before the client receives the last byte of its
response. The background writer stores turns in SQLite later; once everything appended
has been stored, the journal is emptied. At start, turns still in the journal are stored
again, which is safe because ingestion is idempotent (content hashes within a session).

Survives a killed process (the OS holds the written bytes); like SQLite with
`synchronous = NORMAL`, not a power cut.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from memory.ingest.turns import Turn

logger = logging.getLogger(__name__)


class Journal:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def append(self, turn: Turn) -> None:
        record = {
            "user_id": turn.user_id,
            "session_id": turn.session_id,
            "model": turn.model,
            "messages": list(turn.messages),
            "reply": turn.reply,
            "created_at": turn.created_at,
            "partial": turn.partial,
            "response_id": turn.response_id,
            "context_tokens": turn.context_tokens,
            "continues": turn.continues,
        }
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())

    def replay(self) -> list[Turn]:
        """The turns in the journal, as a list (see `turns`)."""
        return list(self.turns())

    def turns(self) -> Iterator[Turn]:
        """The turns in the journal, read one line at a time, so replaying a journal that
        grew large (a long overload spills every turn here) holds one turn in RAM, not the
        file. A torn last line (a crash mid-write) is skipped."""
        try:
            journal = open(self.path, "rb")
        except FileNotFoundError:
            return
        with journal:
            # Binary lines end at b"\n" only; str.splitlines() would also split at U+2028,
            # U+2029 and U+0085, which json.dumps(ensure_ascii=False) leaves inside a text.
            for raw in journal:
                turn = _turn(raw.decode("utf-8", errors="replace"))
                if turn is not None:
                    yield turn

    def clear(self) -> None:
        """Empty the journal: every turn in it is stored."""
        os.ftruncate(self._fd, 0)

    def keep_last(self, count: int) -> None:
        """Keep only the newest `count` turns (the rest are stored): under sustained load the
        queue is never empty when a drain ends, and the journal would otherwise only grow."""
        lines = self.path.read_bytes().splitlines(keepends=True)
        kept = lines[-count:] if count > 0 else []
        fresh = self.path.with_name(self.path.name + ".new")
        fresh.write_bytes(b"".join(kept))
        os.replace(fresh, self.path)  # atomic: a crash leaves the old journal or the new one
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        os.close(self._fd)


def _turn(line: str) -> Turn | None:
    """The turn on one journal line, or None (logged) for a blank or torn one."""
    if not line.strip():
        return None
    try:
        item = json.loads(line)
        return Turn(
            user_id=item["user_id"],
            session_id=item["session_id"],
            model=item["model"],
            messages=tuple(item["messages"]),
            reply=item["reply"],
            created_at=float(item["created_at"]),
            partial=bool(item["partial"]),
            response_id=item.get("response_id"),
            context_tokens=int(item.get("context_tokens") or 0),
            continues=bool(item.get("continues")),
        )
    except (ValueError, KeyError, TypeError):
        logger.warning("skipping a torn journal line")
        return None
