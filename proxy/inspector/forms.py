"""The inspector's forms (POST): log in and out; set, edit, pin, unpin and forget a fact.

`visit.endpoint` has checked each form's CSRF token before these run. A fact form answers
with a redirect to the facts page (so reloading it sends nothing again), or with the page
and the reason when the memory layer refuses a value (400).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.responses import Response

from memory import Fact
from proxy.inspector.access import Refused, cookie_header, login
from proxy.inspector.render import part
from proxy.inspector.visit import Visit, redirect


async def log_in(visit: Visit) -> Response:
    """A key that `proxy.auth` accepts starts a new browser session (a new id) for it; an
    address with too many failed logins waits first (`proxy/inspector/throttle.py`)."""
    if not visit.state.config.keys:
        return redirect("/ui")
    logins = visit.state.inspector.logins
    address = visit.request.client.host if visit.request.client else ""
    wait = logins.wait(address)
    if wait:
        error = f"too many failed logins from this address: try again in {wait} s"
        held = visit.page("login.html", 429, error=error)
        held.headers["retry-after"] = str(wait)
        return held
    try:
        key = login(visit.form.get("key", ""), visit.state.config)
    except Refused as exc:
        logins.failed(address)
        return visit.page("login.html", exc.status, error=exc.message)
    value, _ = visit.state.inspector.signer.cookie(key)
    response = redirect("/ui")
    response.headers.append("set-cookie", cookie_header(value, visit.request))
    return response


async def log_out(visit: Visit) -> Response:
    """End the browser session on the server (a copy of its cookie opens nothing), and have
    the browser drop its cookie."""
    visit.state.inspector.signer.end(visit.viewer.session)
    response = redirect("/ui/login")
    response.headers.append("set-cookie", cookie_header("", visit.request, max_age=0))
    return response


async def set_fact(visit: Visit) -> Response:
    """Add a fact or give a key a new value (the old one is kept as history)."""
    user_id = visit.user()
    form = visit.form
    category = form.get("category", "").strip() or None  # None: keep the current one
    if category is None and not form.get("existing"):
        category = "profile"
    await _change(
        visit, visit.layer.set_fact, user_id, form.get("key", ""), form.get("value", ""), category
    )
    return redirect(_facts(user_id))


async def pin(visit: Visit) -> Response:
    return await _pin(visit, True)


async def unpin(visit: Visit) -> Response:
    return await _pin(visit, False)


async def _pin(visit: Visit, pinned: bool) -> Response:
    user_id = visit.user()
    key = visit.form.get("key", "")
    _found(await _change(visit, visit.layer.pin_fact, user_id, key, pinned), key)
    return redirect(_facts(user_id))


async def forget(visit: Visit) -> Response:
    user_id = visit.user()
    key = visit.form.get("key", "")
    _found(await _change(visit, visit.layer.forget_fact, user_id, key), key)
    return redirect(_facts(user_id))


async def _change(visit: Visit, func: Callable[..., Any], *args: Any) -> Fact | None:
    """Run a fact change; the layer's ValueError (a bad key or value) is a 400 naming it."""
    try:
        fact: Fact | None = await visit.run(func, *args)
    except ValueError as exc:
        raise Refused(400, str(exc)) from None
    return fact


def _found(fact: Fact | None, key: str) -> None:
    if fact is None:
        raise Refused(404, f"no current fact {key!r} for this user")


def _facts(user_id: str) -> str:
    return f"/ui/users/{part(user_id)}/facts"
