"""The one piece of shared runtime state, and how a request finds it.

`AppState` is everything a request may touch: the frozen config, the memory layer (store,
embedder, vector index), the background writer, the pooled httpx client for upstreams,
counters for `/metrics`, and the Responses API replies that just finished
(`proxy/recent_responses.py`). `proxy/app.py` builds it in the lifespan and keeps it on
`app.state.moim`; there are no other globals. It lives in its own module so that the request
steps (pipeline, chat, responses, tool loop, admin, pass-through) can name it without
importing the app that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from starlette.requests import Request

from memory import MemoryLayer
from proxy.config import Config
from proxy.recent_responses import RecentResponses
from proxy.writer import Writer


@dataclass(slots=True)
class AppState:
    config: Config
    layer: MemoryLayer
    writer: Writer
    client: httpx.AsyncClient
    requests: dict[int, int] = field(default_factory=dict)
    responses: RecentResponses = field(default_factory=RecentResponses)


def state_of(request: Request) -> AppState:
    state: AppState = request.app.state.moim
    return state
