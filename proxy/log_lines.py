"""Log lines that stay one line each, whatever a client sends.

A log line quotes what a client chose: a request's path (percent-decoded, so `%0A` is a line
break), the body's `model`, a consolidation model's fact keys. A line break in one wrote a
second line that a log reader takes for moim's own (a forged `request_id=… user_id=admin`
entry), and an ANSI escape rewrote a terminal's screen. Every control character in a line's
message is written as its escape (`\\n`, `\\x1b`); a traceback after it keeps its lines.
"""

from __future__ import annotations

import logging
import re

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """`text` with every control character written as its escape."""
    return _CONTROL.sub(lambda found: ascii(found.group())[1:-1], text)


class OneLineFormatter(logging.Formatter):
    """A formatter whose line (not the traceback after it) holds no control character."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return one_line(super().formatMessage(record))


def log_to_stderr(level: str) -> None:
    """Configure the root logger: `level` and up to stderr, one line a record."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])
