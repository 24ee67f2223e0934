"""The inspector's pages (GET): users, a user's sessions and their turns, facts and a fact's
history, search with every score, and "why this block" for the user's last requests.

Each reads through the memory layer's public methods, for a user the viewer may see
(`Visit.user`); the user list is scoped to the users the viewer may see in the query itself.
"""

from __future__ import annotations

from starlette.responses import Response

from memory import Fact, Hit, UserSummary
from proxy.inspector.access import Refused
from proxy.inspector.ring import BlockRecord
from proxy.inspector.visit import Visit, redirect

MAX_QUERY_CHARS = 2000
MAX_RESULTS = 50
# Why recall left something out, as the "why this block" page says it (memory.LeftOutReason).
REASONS = {
    "present": "already in the request (or in the conversation the provider holds): the "
    "model sees it there",
    "replaced": "a reply the client regenerated: the conversation goes on from another one, "
    "so the model would take this one for something it said",
    "abstained": "low confidence, so recall abstained: no keyword match and a weak best "
    "meaning match (memory.min_similarity), or nothing stood out of the question's topic "
    "(the abstention gate, memory.min_answerable and memory.min_standout)",
    "weak": "low confidence: one weak signal only",
    "empty": "it says nothing (an acknowledgement such as 'thanks!' or 'ok great'): as an "
    "excerpt it would tell the model nothing",
    "pool": "ranked below the best hits that excerpts are cut from",
    "excerpts": "budget: no room left in this tier's excerpts",
    "repeated": "its words are in the request already, or in another line of its excerpt "
    "(a reply resent reformatted, a continued reply's pieces): shown once",
    "context_budget": "budget: the request's token cap (X-Memory-Context-Budget)",
    "facts_budget": "budget: past the facts section's cap (memory.facts_max_tokens)",
    "silent": "its category's silence limit passed",
}


async def users(visit: Visit) -> Response:
    found: list[UserSummary] = await visit.run(visit.layer.users, visit.viewer.only)
    kept = {u.user_id: len(visit.state.inspector.history.recent(u.user_id)) for u in found}
    return visit.page("users.html", users=found, kept=kept)


async def user(visit: Visit) -> Response:
    user_id = visit.user()
    stats = await visit.run(visit.layer.stats, user_id)
    sessions = await visit.run(visit.layer.sessions, user_id)
    return visit.page("user.html", user_id=user_id, tab="sessions", stats=stats, sessions=sessions)


async def session(visit: Visit) -> Response:
    user_id = visit.user()
    session_id = visit.request.path_params["session_id"]
    turns = await visit.run(visit.layer.turns, user_id, session_id)
    return visit.page(
        "session.html", user_id=user_id, tab="sessions", session_id=session_id, turns=turns
    )


async def facts(visit: Visit) -> Response:
    user_id = visit.user()
    rows: list[Fact] = await visit.run(visit.layer.list_facts, user_id, None)
    active = [f for f in rows if f.status == "active"]
    active.sort(key=lambda f: (not f.pinned, f.key))
    past = sorted((f for f in rows if f.status != "active"), key=lambda f: -f.updated_at)
    return visit.page("facts.html", user_id=user_id, tab="facts", active=active, past=past[:200])


async def fact_history(visit: Visit) -> Response:
    user_id = visit.user()
    key = visit.request.query_params.get("key", "")
    rows: list[Fact] = await visit.run(visit.layer.fact_history, user_id, key) if key else []
    if not rows:
        raise Refused(404, f"no fact {key!r} for this user")
    return visit.page("fact.html", user_id=user_id, tab="facts", key=rows[0].key, rows=rows)


async def search(visit: Visit) -> Response:
    user_id = visit.user()
    query = visit.request.query_params.get("q", "")[:MAX_QUERY_CHARS]
    k = _count(visit.request.query_params.get("k", "10"))
    hits: list[Hit] = []
    if query.strip():
        hits = await visit.run(visit.layer.search, user_id, query, k)
    return visit.page("search.html", user_id=user_id, tab="search", query=query, k=k, hits=hits)


async def why(visit: Visit) -> Response:
    user_id = visit.user()
    history = visit.state.inspector.history
    wanted = visit.request.query_params.get("request")
    records = await _still_held(visit, history.recent(user_id))
    if wanted is None:
        return visit.page(
            "why.html", user_id=user_id, tab="why", records=records, size=history.size
        )
    record = next((r for r in records if r.request_id == wanted), None)
    if record is None:
        raise Refused(404, "that request is no longer kept (or never was)")
    scores = {hit.chunk.id: hit for hit in record.hits}
    return visit.page(
        "why_one.html", user_id=user_id, tab="why", r=record, scores=scores, reasons=REASONS
    )


async def _still_held(visit: Visit, records: list[BlockRecord]) -> list[BlockRecord]:
    """The kept requests whose user the store still holds what they quote of
    (`MemoryLayer.holds`); the others go from the ring: their user was forgotten through
    another replica, or by `moim memory delete`, and their blocks and queries quote what was
    forgotten. A request of this process whose turn the writer has not stored yet is asked
    about again once it has."""
    held = {r.request_id: await _holds(visit, r) for r in records}
    if any(not held[r.request_id] and r.mode != "read" for r in records):
        await visit.state.writer.flush(timeout=10.0)
        for record in records:
            if not held[record.request_id]:
                held[record.request_id] = await _holds(visit, record)
    if gone := {request_id for request_id, ok in held.items() if not ok}:
        visit.state.inspector.history.discard(records[0].user_id, gone)
    return [r for r in records if held[r.request_id]]


async def _holds(visit: Visit, record: BlockRecord) -> bool:
    shown = [hit.chunk for hit in record.hits]
    left_out = [item.hit.chunk if item.hit else item.chunk for item in record.left_out]
    ids = [chunk.id for chunk in (*shown, *left_out) if chunk is not None]
    return bool(await visit.run(visit.layer.holds, record.user_id, record.session_id, ids))


async def login_page(visit: Visit) -> Response:
    if visit.viewer.key is not None or visit.viewer.open:
        return redirect("/ui")
    return visit.page("login.html", error=None)


def _count(value: str) -> int:
    try:
        return min(max(int(value), 1), MAX_RESULTS)
    except ValueError:
        return 10
