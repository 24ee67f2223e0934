"""A write-ahead journal of finished turns, so a crash never loses one.

A turn is appended here (one JSON line: open with O_APPEND, write, close; tens of
microseconds, no database, no fsync) before the client receives the last byte of its
response. The background writer stores turns in SQLite later; once everything appended
has been stored, the journal is emptied. At start, turns still in the journal are stored
again, which is safe because ingestion is idempotent (content hashes within a session).

Every operation opens the path afresh rather than holding a descriptor: a journal that was
deleted or replaced while the process runs is written where the path says (a held
descriptor would write to a file no restart will read), and a path that stops being
writable fails on the next append, where the writer sees it. Any operation may raise
`OSError` (a full disk, EIO, a path that is a directory); the caller decides what to do.
A write that fails half-way leaves a torn line; the next append starts on a fresh line, so
only the torn one is skipped on replay.

Survives a killed process (the OS holds the written bytes); like SQLite with
`synchronous = NORMAL`, not a power cut.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from memory.ingest.turns import Turn

logger = logging.getLogger(__name__)

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT


class Journal:
    def __init__(self, path: Path | str) -> None:
        """Open (create) the journal at `path`; raises OSError when it cannot be."""
        self.path = Path(path)
        self._torn = False  # the last write failed part-way: start the next on a new line
        os.close(os.open(self.path, _APPEND, 0o600))

    def append(self, turn: Turn) -> None:
        """Add a turn as one line. Raises OSError when the file cannot be written, and
        ValueError for text that is not valid Unicode (a lone surrogate)."""
        self._write(turn_line_bytes(turn))

    def probe(self) -> None:
        """Write a byte at the end and take it back: raises OSError unless writes work."""
        fd = os.open(self.path, _APPEND, 0o600)
        try:
            size = os.fstat(fd).st_size
            os.write(fd, b"\n")
            os.ftruncate(fd, size)  # were this to fail, an empty line is skipped on replay
        finally:
            os.close(fd)

    def _write(self, data: bytes) -> None:
        if self._torn:
            data = b"\n" + data
        fd = os.open(self.path, _APPEND, 0o600)
        try:
            view = memoryview(data)
            while view:  # a short write (the disk filling up) is followed by its error
                self._torn = True
                view = view[os.write(fd, view) :]
            self._torn = False
        finally:
            os.close(fd)

    def replay(self) -> list[Turn]:
        """The turns in the journal, as a list (see `turns`)."""
        return list(self.turns())

    def turns(self) -> Generator[Turn, None, None]:
        """The turns in the journal, read one line at a time, so replaying a journal that
        grew large (a long overload spills every turn here) holds one turn in RAM, not the
        file. A torn line (a crash mid-write) is skipped; a missing journal holds none."""
        with self._reading() as journal:
            # Binary lines end at b"\n" only; str.splitlines() would also split at U+2028,
            # U+2029 and U+0085, which json.dumps(ensure_ascii=False) leaves inside a text.
            for raw in journal:
                turn = _turn(raw.decode("utf-8", errors="replace"))
                if turn is not None:
                    yield turn

    def count(self) -> int:
        """Lines that may hold a turn (a torn one counts too): what a replay would store at
        most. Read without parsing, for the backlog a new process reports before its replay."""
        with self._reading() as journal:
            return sum(1 for raw in journal if raw.strip())

    def clear(self) -> None:
        """Empty the journal (every turn in it is stored); recreate it if it is missing."""
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))

    def keep_last(self, count: int) -> None:
        """Keep only the newest `count` turns (the rest are stored): under sustained load the
        queue is never empty when a drain ends, and the journal would otherwise only grow.
        Empty lines are not turns and do not count."""
        with self._reading() as journal:
            lines = [line for line in journal if line.strip()]
        self._rewrite(lines[-count:] if count > 0 else [])
        self._torn = False

    def drop_user(self, user_id: str, session_id: str | None = None) -> None:
        """Remove every turn of a forgotten user (of one session of theirs, when named), so
        that no replay (a restart, a spill) stores them again after they were forgotten; other
        lines are kept as they are."""
        with self._reading() as journal:
            lines = [line for line in journal if not _of_user(line, user_id, session_id)]
        self._rewrite(lines)

    def _rewrite(self, lines: list[bytes]) -> None:
        """The journal replaced by `lines`, atomically (a crash leaves the old journal or the
        new one), and private as the journal is made (0600: it holds users' turns)."""
        fresh = self.path.with_name(self.path.name + ".new")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(lines))
        os.replace(fresh, self.path)

    def size(self) -> int:
        """Bytes in the journal (0 when it is missing)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    @contextmanager
    def _reading(self) -> Iterator[BinaryIO | list[bytes]]:
        """The journal open for reading, or no lines when it is missing. Refuses anything
        but a regular file: a device such as /dev/zero would never end a line."""
        try:
            journal = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            yield []
            return
        with journal:
            if not stat.S_ISREG(os.fstat(journal.fileno()).st_mode):
                raise OSError(errno.EINVAL, "the journal is not a regular file", str(self.path))
            yield journal


def turn_line(turn: Turn) -> str:
    """A turn as one line of JSON, the form every journal (file or `pending_turns`) keeps:
    its messages as `Turn.messages_json` has them, when it has."""
    head = _head(turn)
    if turn.messages_json is None:
        return head
    return f'{head[:-1]},"messages":{turn.messages_json}}}'


def turn_line_bytes(turn: Turn) -> bytes:
    """`turn_line` as UTF-8, with its line break. The messages' text is encoded apart from
    the rest: a reply's one "—" or "’" made the whole line a two-byte str, encoded character
    by character (an agent's 487 kB: 0.36 ms on the event loop at the stream's end, against
    0.03 for the client's ASCII text copied as it is)."""
    head = _head(turn)
    if turn.messages_json is None:
        return (head + "\n").encode()
    return b"".join((head[:-1].encode(), b',"messages":', turn.messages_json.encode(), b"}\n"))


def _head(turn: Turn) -> str:
    """The turn's record as JSON: with its messages, but for those `messages_json` holds."""
    record: dict[str, Any] = {
        "user_id": turn.user_id,
        "session_id": turn.session_id,
        "model": turn.model,
        "reply": turn.reply,
        "created_at": turn.created_at,
        "partial": turn.partial,
        "response_id": turn.response_id,
        "context_tokens": turn.context_tokens,
        "continues": turn.continues,
        "arrived_at": turn.arrived_at,
        "answer_in_call": turn.answer_in_call,
        "named_session": turn.named_session,
    }
    if turn.messages_json is None:
        record["messages"] = list(turn.messages)
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _of_user(raw: bytes, user_id: str, session_id: str | None = None) -> bool:
    """Whether a journal line holds a turn of `user_id` (and of `session_id`, when named; a
    torn line holds none)."""
    try:
        item = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(item, dict) or item.get("user_id") != user_id:
        return False
    return session_id is None or item.get("session_id") == session_id


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
            arrived_at=_time(item.get("arrived_at")),
            answer_in_call=bool(item.get("answer_in_call")),
            named_session=bool(item.get("named_session")),
        )
    except (ValueError, KeyError, TypeError):
        logger.warning("skipping a torn journal line")
        return None


def _time(value: Any) -> float | None:
    return None if value is None else float(value)
