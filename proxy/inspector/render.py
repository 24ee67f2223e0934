"""HTML for the inspector: Jinja2 templates with autoescaping, and the headers every page gets.

Stored text is untrusted (anyone who chats writes it), so every value a template shows goes
through HTML escaping: autoescape is on for every template, and no template marks anything
safe (tests/e2e/test_inspector.py checks both). The Content-Security-Policy allows nothing but
moim's own stylesheet: no script runs, none is loaded, forms post only to moim, and no other
site may frame a page. Pages are never cached, and their URLs (which hold search queries)
are never sent on as a referrer.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.responses import HTMLResponse, Response

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of `proxy/inspector/templates/`, every value escaped."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("proxy.inspector", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, score=score, bm25=bm25, part=part)
    return env


def html(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page from `template` with the security headers."""
    text = environment().get_template(template).render(**context)
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


def secure(response: Response) -> Response:
    """Add the security headers to a response made elsewhere (a redirect)."""
    response.headers.update(SECURITY_HEADERS)
    return response


@functools.cache
def stylesheet() -> bytes:
    return resources.files("proxy.inspector").joinpath("static/inspector.css").read_bytes()


def when(seconds: float | None) -> str:
    """Unix seconds as UTC date and time to the second; "—" for none."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return "—"
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return "—"


def score(value: float | None, places: int = 3) -> str:
    """A score to `places` decimals; "—" when there is none."""
    return "—" if value is None else f"{value:.{places}f}"


def bm25(value: float | None) -> str:
    """A BM25 score to 3 significant digits (a small store's are tiny: 1.88e-06)."""
    return "—" if value is None else f"{value:.3g}"


def part(value: str) -> str:
    """`value` quoted for one URL path segment (user and session ids)."""
    return quote(value, safe="")
