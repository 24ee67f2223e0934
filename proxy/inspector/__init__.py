"""The web inspector at `/ui`: see and steer what moim remembers, and why it injected it.

Server-rendered HTML (Jinja2, every value escaped), one stylesheet served by moim, no script,
no build step: it reads the same with JavaScript off. The modules:

- `access`: who may look, for which users; the signed login cookie and CSRF tokens
- `visit`: the frame of every request (viewer, cookie, CSRF check, error pages)
- `pages`: the GET pages; `forms`: the POST forms (login, logout, facts)
- `render`: the templates and the security headers; `ring`: "why this block"'s history,
  which `proxy/pipeline.py` records into after each recall

Off with `inspector.enabled: false` (no routes at all).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.config import Config
from proxy.inspector import forms, pages
from proxy.inspector.render import stylesheet
from proxy.inspector.visit import Inspector, endpoint

__all__ = ["Inspector", "routes"]

_USER = "/ui/users/{user_id}"


def routes(config: Config) -> list[Route]:
    """The inspector's routes; none when `inspector.enabled` is false."""
    if not config.inspector.enabled:
        return []
    return [
        Route("/ui", endpoint(pages.users), methods=["GET"]),
        Route("/ui/static/inspector.css", _stylesheet, methods=["GET"]),
        Route("/ui/login", endpoint(pages.login_page, login_page=True), methods=["GET"]),
        Route("/ui/login", endpoint(forms.log_in, login_page=True), methods=["POST"]),
        Route("/ui/logout", endpoint(forms.log_out, login_page=True), methods=["POST"]),
        Route(_USER, endpoint(pages.user), methods=["GET"]),
        # an imported session id may hold a "/" (a live one may not: proxy/identity.py)
        Route(_USER + "/sessions/{session_id:path}", endpoint(pages.session), methods=["GET"]),
        Route(_USER + "/facts", endpoint(pages.facts), methods=["GET"]),
        Route(_USER + "/facts", endpoint(forms.set_fact), methods=["POST"]),
        Route(_USER + "/facts/history", endpoint(pages.fact_history), methods=["GET"]),
        Route(_USER + "/facts/pin", endpoint(forms.pin), methods=["POST"]),
        Route(_USER + "/facts/unpin", endpoint(forms.unpin), methods=["POST"]),
        Route(_USER + "/facts/forget", endpoint(forms.forget), methods=["POST"]),
        Route(_USER + "/search", endpoint(pages.search), methods=["GET"]),
        Route(_USER + "/why", endpoint(pages.why), methods=["GET"]),
    ]


async def _stylesheet(request: Request) -> Response:
    """The one file a page loads; public (it holds no data), cached for an hour."""
    headers = {"cache-control": "public, max-age=3600", "x-content-type-options": "nosniff"}
    return Response(stylesheet(), media_type="text/css", headers=headers)
