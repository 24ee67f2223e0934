"""One request to the inspector: who is looking, the form they sent, and the answer's frame.

`endpoint` wraps each page and form handler: it finds the viewer (`access.viewer_of`),
gives a first-time browser its cookie, checks a POST's CSRF token before the handler runs,
and turns a refusal, a missing login or a busy store into a page (or a redirect) instead of
an error in another shape. Handlers receive a `Visit`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from memory import MemoryLayer, MemoryLayerError
from proxy.config import Config
from proxy.inspector.access import (
    LoginNeeded,
    Refused,
    Signer,
    Viewer,
    cookie_header,
    viewer_of,
)
from proxy.inspector.render import html, secure
from proxy.inspector.ring import History
from proxy.inspector.throttle import LoginThrottle
from proxy.limits import read_body

if TYPE_CHECKING:
    from proxy.state import AppState

logger = logging.getLogger(__name__)

MAX_FORM_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Inspector:
    """The inspector's share of the app state: the request ring, the cookie signer and the
    failed logins by address."""

    history: History
    signer: Signer
    logins: LoginThrottle

    @classmethod
    def from_config(cls, config: Config) -> Inspector:
        size = config.inspector.history if config.inspector.enabled else 0
        return cls(History(size), Signer(config.inspector.secret), LoginThrottle())


@dataclass(frozen=True, slots=True)
class Visit:
    """A request to the inspector, its viewer vetted and its form's CSRF token checked."""

    request: Request
    state: AppState
    viewer: Viewer
    form: Mapping[str, str]

    @property
    def layer(self) -> MemoryLayer:
        return self.state.layer

    def user(self) -> str:
        """The path's user, if this viewer may see them (else `Refused`, 403)."""
        user_id: str = self.request.path_params["user_id"]
        if not self.viewer.may_see(user_id):
            raise Refused(403, f"this key may not see the memory of user {user_id!r}")
        return user_id

    def page(self, template: str, status: int = 200, **context: Any) -> Response:
        """`template` rendered with what every page shows (the viewer, a CSRF token)."""
        signer = self.state.inspector.signer
        return html(
            template,
            status,
            viewer=self.viewer,
            csrf=signer.csrf(self.viewer.session),
            **context,
        )

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        """A memory-layer call, in a worker thread (it may block on SQLite)."""
        return await anyio.to_thread.run_sync(func, *args)


Handler = Callable[[Visit], Awaitable[Response]]


def endpoint(
    handler: Handler, login_page: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint running `handler` for a vetted viewer (see the module docstring)."""

    async def serve(request: Request) -> Response:
        state: AppState = request.app.state.moim
        signer = state.inspector.signer
        fresh = None
        try:
            viewer = viewer_of(request, state.config, signer, login_page)
            if viewer is None:  # a first visit: a browser session to tie CSRF tokens to
                fresh, session = signer.cookie(None)
                viewer = Viewer(None, session, open=not state.config.keys)
            form: dict[str, str] = {}
            if request.method == "POST":
                form = await _form(request, state.config)
                if not signer.csrf_ok(viewer.session, form.get("csrf", "")):
                    raise Refused(403, "this form is out of date or came from elsewhere: reload")
            response = await handler(Visit(request, state, viewer, form))
        except LoginNeeded:
            response = secure(RedirectResponse("/ui/login", status_code=303))
        except Refused as exc:
            response = html("error.html", exc.status, viewer=None, message=exc.message)
        except MemoryLayerError as exc:
            logger.warning("inspector %s: store unavailable: %s", request.url.path, exc)
            message = "the memory store is busy or unavailable; retry shortly"
            response = html("error.html", 503, viewer=None, message=message)
        if fresh is not None:
            response.headers.append("set-cookie", cookie_header(fresh, request))
        return response

    return serve


async def _form(request: Request, config: Config) -> dict[str, str]:
    """A urlencoded form's fields (the first value of each); a form is small (`MAX_FORM_BYTES`)."""
    limit = min(config.max_body_bytes, MAX_FORM_BYTES)
    body = await read_body(request, limit, config.body_timeout)
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def redirect(path: str) -> Response:
    """See `path` (after a form: the page it was sent from)."""
    return secure(RedirectResponse(path, status_code=303))
