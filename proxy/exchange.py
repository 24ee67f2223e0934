"""The records one request with memory passes along the pipeline (proxy/pipeline.py).

`Report` is its running account (the `x-memory-*` headers, the log line, the metrics);
`Conversation` what the memory steps read from the body, whatever its API; `Prepared` what
recall and inject made of it; `Exchange` all of it together, for forwarding; `Api` what makes
one endpoint (chat completions, the Responses API) different from another.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import Response
from starlette.types import Receive

from memory import MemoryBlock, Placement
from proxy.config import Config
from proxy.identity import Identity
from proxy.json_items import Edit, Items, Located
from proxy.upstream import Target

if TYPE_CHECKING:
    from proxy.state import AppState


@dataclass(slots=True)
class Report:
    """What moim did for one request, sent back as `x-memory-*` headers."""

    request_id: str
    mode: str = "off"
    session_id: str = ""
    tier: int = 0
    fill_ratio: float = 0.0
    block: MemoryBlock | None = None  # the block injected
    chunks: int = 0
    facts: int = 0
    overhead_ms: float = 0.0
    error: str | None = None
    # The wait for the user's turns not yet searchable (proxy/writer_recent.py), and how many
    # were still not when recall ran.
    waited_ms: float = 0.0
    unsearchable: int = 0
    # For /metrics (proxy/metrics.py), not sent: whether recall ran, whether it abstained,
    # and the kind of a memory failure the request went on without.
    recalled: bool = False
    abstained: bool = False
    error_kind: str | None = None
    # The chat UI whose background task this was, passed through without memory
    # (`Identity.ui_task`): `x-memory-skipped: ui-task`, and counted by /metrics.
    ui_task: str | None = None

    @property
    def tokens(self) -> int:
        """Tokens of the block injected (0 without one)."""
        return self.block.tokens if self.block is not None else 0

    def without_block(self, why: str) -> None:
        """The request goes on without its block after all (`why`): the headers, the log
        line, the metrics, the stored turn's `injected_facts` and the inspector's record
        (which read `block`) then say that nothing was injected."""
        self.block, self.chunks, self.facts = None, 0, 0
        self.error = why

    def headers(self) -> dict[str, str]:
        headers = {
            "x-request-id": self.request_id,
            "x-memory-mode": self.mode,
            "x-memory-session-id": self.session_id,
            "x-memory-tier": str(self.tier),
            "x-memory-fill-ratio": f"{self.fill_ratio:.4f}",
            "x-memory-tokens-injected": str(self.tokens),
            "x-memory-chunks-injected": str(self.chunks),
            "x-memory-facts-injected": str(self.facts),
            "x-memory-overhead-ms": f"{self.overhead_ms:.2f}",
        }
        if self.waited_ms:
            headers["x-memory-waited-ms"] = f"{self.waited_ms:.2f}"
        if self.unsearchable:
            headers["x-memory-unsearchable-turns"] = str(self.unsearchable)
        if self.error:
            headers["x-memory-error"] = self.error
        if self.ui_task is not None:
            headers["x-memory-skipped"] = "ui-task"
        return headers

    def log_notes(self) -> str:
        """What the request's log line adds when there is something to say: why memory did
        nothing for a UI's task, what failed in it."""
        notes = f" skipped=ui-task ui={self.ui_task}" if self.ui_task is not None else ""
        return notes + (f" memory_error={self.error!r}" if self.error else "")


@dataclass(frozen=True, slots=True)
class Conversation:
    """What the memory steps read from one request, whatever its API.

    `messages` are chat messages (role, content, tool_calls, tool_call_id): what memory
    measures, recalls for, leaves out of recall and stores. `place(block, placement, model)`
    returns the body to send with a block placed, naming `model` (the provider's name for it:
    a config alias renames it). `continues` is the Responses API reply the request continues
    (`previous_response_id`), `thread` the provider's conversation it is part of (its
    `conversation`): either way the provider holds the earlier turns. `reply_tokens` is what
    the request reserves of the context window for the reply (`reply_reserve`);
    `definitions` what else of the body the provider counts against the window (tool and
    function definitions, a response schema), and `media_parts` the images, audio and files
    among the messages (`proxy/room.py` counts both).
    """

    model: str
    messages: Sequence[Mapping[str, Any]]
    place: Callable[[str, Placement, str], bytes]
    continues: str | None = None
    thread: str | None = None
    reply_tokens: int = 0
    definitions: tuple[Any, ...] = ()
    media_parts: int = 0
    # Where the messages lie in the body's text (chat): the journal's line copies them.
    message_items: Items | None = None
    # Where the body's values lie in its text: a config alias's model name is written there.
    text: Located | None = None

    @property
    def held(self) -> bool:
        """The provider holds the earlier turns: the request carries only new ones."""
        return self.continues is not None or self.thread is not None


def reply_reserve(body: Mapping[str, Any], *names: str) -> int:
    """The tokens a request reserves for its reply: the largest of the fields `names` it sets
    to a positive integer (chat's `max_completion_tokens` and `max_tokens`, the Responses
    API's `max_output_tokens`), else 0. A provider refuses a request whose input and reserved
    reply pass the model's context window, so the block must fit in what is left."""
    sizes = [body.get(name) for name in names]
    numbers = (s for s in sizes if isinstance(s, int) and not isinstance(s, bool))
    return max((n for n in numbers if n > 0), default=0)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request with memory, after the memory steps: what forwarding it needs.

    Built once in `handle` and passed whole to the API's `forward`, the byte path and the
    tool loop. `report` is the request's running account (headers, log line): the one part
    that still changes while the answer streams.
    """

    state: AppState
    header_lines: Sequence[tuple[bytes, bytes]]  # the request's, as ASGI gives them
    target: Target
    body: dict[str, Any]
    raw: bytes
    conversation: Conversation
    prepared: Prepared
    authorization: str | None
    report: Report
    # The client's connection, its body read: says when the client leaves (client_gone.py).
    receive: Receive
    query: str = ""  # the client's query string, raw, passed on as it came (`?api-version=…`)
    forget_mark: int = 0  # the writer's as the request arrived (`Writer.forgotten_since`)
    arrived_at: float | None = None  # the clock's then (`Turn.arrived_at`: other replicas')

    @property
    def forces_a_function(self) -> bool:
        """Whether the request names the function the model must call (`tool_choice`: chat's
        `{"type": "function", "function": {"name"}}`, the Responses API's `{"type":
        "function", "name"}`): structured output through a tool, its call arguments the
        answer (`Turn.answer_in_call`)."""
        choice = self.body.get("tool_choice")
        return isinstance(choice, Mapping) and choice.get("type") == "function"

    @property
    def outbound(self) -> bytes:
        """The body as it goes upstream: the block placed (if any) and a config alias's
        model name."""
        return self.prepared.body if self.prepared.body is not None else self.plain

    @property
    def plain(self) -> bytes:
        """The client's body as it goes upstream without a block: a config alias's model
        name written in."""
        return renamed(self.raw, self.conversation.text, self.body, self.target.model)


Forward = Callable[[Exchange], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Api:
    """One endpoint with memory: how its body is read and checked (raising BadRequest), with
    what the memory steps read from it (the bool: whether they may place a block or journal
    the turn), and how it goes to the provider."""

    read: Callable[[bytes, int, bool], tuple[dict[str, Any], Conversation]]
    forward: Forward
    # Refuses (BadRequest) a body its route may not take, e.g. chat's litellm allow-list.
    check: Callable[[dict[str, Any], Target, Config], None] | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """Who the request is for (session resolved) and the body to send (None: the client's)."""

    who: Identity
    body: bytes | None = None
    fact_ids: tuple[int, ...] = ()
    # Makes what the inspector shows of the request (`History.record`): after the answer.
    settle: Callable[[], None] | None = None


def renamed(raw: bytes, text: Located | None, body: Mapping[str, Any], model: str) -> bytes:
    """The client's body `raw` (`body` parsed, `text` located) naming `model`: a config alias
    renames the model the client named, its value written into the client's text, every
    other byte kept (`json.dumps` of a 487 kB body took ~4.7 ms, docs/performance.md)."""
    if model == body["model"]:
        return raw
    if text is not None:
        return text.edited(model_edit(text, body, model))
    return json.dumps({**body, "model": model}, ensure_ascii=False).encode()


def model_edit(text: Located, body: Mapping[str, Any], model: str) -> Edit | None:
    """The edit of the client's text naming `model`; None when the client named it."""
    if model == body["model"]:
        return None
    return text.value_edit("model", json.dumps(model, ensure_ascii=False))
