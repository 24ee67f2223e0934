"""Step 4b, the order hits are packed in: who opens an excerpt before whom.

The block holds the tier's excerpts, filled best hit first (`memory.block.excerpts`). Two
turns go before their rank: a user's turn that a better-ranked reply answers goes just before
it (`asked_before_answered`), and, for a question about the user's present, a newer
conversation's user turn goes before a hit that would open a second excerpt of one
conversation (`newer_turn`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from memory.records import Hit

# How many of the tier's excerpts one conversation opens before a newer conversation's user
# turn, still to come in the hits, opens one (`newer_turn`).
ONE_CONVERSATION = 1


def newer_turn(to_come: Sequence[Hit], in_block: Collection[str], said: float) -> Hit | None:
    """The first hit of `to_come` that is a user turn of a conversation not `in_block` (by
    session id), said after `said`: it opens an excerpt before a hit that would open another
    of a conversation the block already holds (everything the block holds of it was said by
    `said`), when the question asks about the user's present.

    The user's first conversation often holds a long turn full of their details and replies
    that restate them, and after a change the question matches those best: they fill the tier
    (fresh12: "Which animals do I work with at the park?" gets two excerpts of the first
    conversation and two of the second, and the newer turn "… I've moved over to the elephant
    team, started Monday" is the hit just below). A second excerpt of one conversation adds
    one more of its turns; a newer conversation's turn may be what holds now. Only a user turn
    (who says what changed), only for a question about the present
    (`memory.recall.changed.about_the_present`), and only in place of a second excerpt: the
    best hit of each conversation keeps its place. Without these limits (any question, or any
    hit of another conversation waiting) it cost memsuite's long (held out) pref 1.00 → 0.91
    and para 0.92 → 0.88 (docs/recall-quality.md, "Twenty-third pass").
    """
    return next(
        (
            hit
            for hit in to_come
            if hit.chunk.role == "user"
            and hit.chunk.session_id not in in_block
            and hit.chunk.created_at > said
        ),
        None,
    )


def asked_before_answered(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` in packing order: a kept user turn that a better-ranked reply answers (its
    session's turn before the reply's, by `Chunk.turn`) is moved up to just before it.

    A reply often matches a question best because it restates the user's detail in other
    words, while the detail is in the turn it answers (long: "How often does my photography
    club go out together?" ranks "Group walks are great for learning: …" fifth, and "I joined a
    photo walk group that meets once a month …" twelfth, behind turns other words matched).
    Placed first, the turn takes its room in the passage before the reply does. Only the
    order changes: the hits are recall's kept ones, after the gate. bench/memsuite_tune.py:
    long tuning paraphrase 0.95 → 0.99; fresh6 (blind) update 0.78 → 0.88; LoCoMo unchanged.
    """
    asked: dict[tuple[str, int], list[Hit]] = {}
    for hit in hits:
        chunk = hit.chunk
        if chunk.role == "user" and chunk.turn is not None:
            asked.setdefault((chunk.session_id, chunk.turn), []).append(hit)
    if not asked:
        return list(hits)
    order: list[Hit] = []
    moved: set[int] = set()
    for hit in hits:
        chunk = hit.chunk
        if chunk.id in moved:
            continue
        if chunk.role == "assistant" and chunk.turn is not None:
            for turn in asked.get((chunk.session_id, chunk.turn - 1), ()):
                if turn.chunk.id not in moved:
                    order.append(turn)
                    moved.add(turn.chunk.id)
        order.append(hit)
        moved.add(chunk.id)
    return order
