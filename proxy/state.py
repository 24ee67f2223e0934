"""The one piece of shared runtime state, and how a request finds it.

`AppState` is everything a request may touch: the frozen config, the memory layer (store,
embedder, vector index), the background writer, the pooled httpx client for upstreams,
counters and histograms for `/metrics` (`proxy/metrics.py`), the MCP endpoint
(`proxy/mcp_server.py`, None without the `mcp` extra), the Responses API replies that just
finished (`proxy/recent_responses.py`) and those still being written (`proxy/background.py`),
and the web inspector's request ring and cookie signer (`proxy/inspector/`). `proxy/app.py`
builds it in the lifespan and keeps it on `app.state.moim`; there are no other globals. It
lives in its own module so that the request steps (pipeline, chat, responses, tool loop,
admin, pass-through) can name it without importing the app that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from starlette.requests import Request

from memory import MemoryLayer
from proxy.background import BackgroundReplies
from proxy.config import Config
from proxy.inspector.visit import Inspector
from proxy.metrics import Metrics
from proxy.recent_responses import RecentResponses
from proxy.writer import Writer

if TYPE_CHECKING:
    from proxy.mcp_server import McpEndpoint


@dataclass(slots=True)
class AppState:
    config: Config
    layer: MemoryLayer
    writer: Writer
    client: httpx.AsyncClient
    metrics: Metrics = field(default_factory=Metrics)
    responses: RecentResponses = field(default_factory=RecentResponses)
    background: BackgroundReplies = field(default_factory=BackgroundReplies)
    inspector: Inspector = field(default_factory=lambda: Inspector.from_config(Config()))
    mcp: McpEndpoint | None = None


def state_of(request: Request) -> AppState:
    state: AppState = request.app.state.moim
    return state
