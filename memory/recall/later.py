"""Step 3d, what came later: keep the user's newer turn on the subject of a kept hit.

After a user changes something (moved, a new job, a new rate, a new client), the question
often matches the old turn better than the new one: "What do I charge per word?" has cosine
0.56 with "I charge 0.11 euros a word" and 0.31 with "my rate goes up to 0.14 from July", and
"Who is my main client these days?" 0.27 with the turn that names the new one, under the
0.35 floor a dense-only hit must pass. The old turn and the new one are close to each other,
though (0.61 and 0.60): they are about the same thing. So for each of the best kept hits,
recall looks among the candidates it did not keep for a user turn said later whose vector
is close to the hit's own (chunk to chunk, not to the question) and keeps it too, after
every kept hit: it only takes room in the block that the kept hits leave, and the block
shows excerpts newest first (`memory.block.excerpts.newest_first`), so once in, it leads.

Placed right before the hit it updates instead, it won more on memsuite and cost LoCoMo 1.4
points of hit: in a long two-person conversation most turns have later turns on their subject,
and they pushed evidence out (docs/recall-quality.md, "What came later on the same subject").

It reads only vectors recall already has in RAM, the best kept hits' and the dropped
candidates' (at most `Settings.candidates` per retriever), in one small matrix product; it
never scans the user's matrix. It runs only when recall keeps something: an abstention
stays one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from memory.recall.scoring import Ranked
from memory.records import Chunk, Hit

# Who says what changed: the user. An assistant's later reply on the subject echoes the old
# value as often as the new (memsuite, tuning half: paraphrase 0.92 user turns only, 0.89 any).
LATER_ROLES = frozenset({"user"})


def later_on_same_subject(
    kept: Sequence[Hit],
    candidates: Sequence[Hit],
    vectors: Mapping[int, np.ndarray],
    min_similarity: float,
    top: int,
    min_query_similarity: float = 0.0,
) -> list[Hit]:
    """`kept`, then the later turn on the subject of each of its first `top` hits.

    A later turn is a hit of `candidates` not in `kept`, a user turn said after the kept hit
    (its `created_at` is greater), whose cosine with the question is at least
    `min_query_similarity` and whose vector's cosine with the kept hit's is at least
    `min_similarity`; of several, the closest. Each is kept once, for the first (best) hit it
    updates, and they follow `kept` in that order, with their own scores. `vectors` maps
    chunk ids to unit vectors; a hit without one neither lends nor borrows.
    """
    kept_ids = {h.chunk.id for h in kept}
    pool = [
        h
        for h in candidates
        if h.chunk.id not in kept_ids
        and h.chunk.id in vectors
        and may_come_later(h.chunk, h.similarity, min_query_similarity)
    ]
    heads = [h for h in kept[:top] if h.chunk.id in vectors]
    if not pool or not heads:
        return list(kept)
    closeness = (
        np.stack([vectors[h.chunk.id] for h in heads])
        @ np.stack([vectors[h.chunk.id] for h in pool]).T
    )
    when = np.array([h.chunk.created_at for h in pool])
    later: list[Hit] = []
    for row, head in enumerate(heads):
        close = np.where(
            (when > head.chunk.created_at) & (closeness[row] >= min_similarity),
            closeness[row],
            -np.inf,
        )
        for column in np.argsort(-close, kind="stable").tolist():
            if close[column] == -np.inf:
                break
            if pool[column] not in later:
                later.append(pool[column])
                break
    return [*kept, *later]


def may_come_later(chunk: Chunk, similarity: float | None, min_query_similarity: float) -> bool:
    """Whether a dropped candidate may be a kept hit's later turn, by its role and its cosine
    with the question (`later_on_same_subject`'s test before the vectors): recall reads the
    vectors of, and builds records for, only the candidates that pass."""
    return chunk.role in LATER_ROLES and (similarity is None or similarity >= min_query_similarity)


def later_by_keyword(kept: list[Hit], ranked: Ranked, keyword: Collection[int]) -> list[Hit]:
    """`kept`, then the best dropped user turn found by the question's words (`keyword`: the
    lexical search's first hits) and said after the oldest kept user turn found by them.

    For a question the gate let through: the turn that changed something often says it in
    other words, so its cosine with the question is under the floor a keyword match needs
    (fresh5: "Which team am I in at work now?" has cosine 0.15 with "Update, I've moved from
    child protection to the fostering team, …", 0.36 with the kept turn "… in a child
    protection team …": not close enough for `later_on_same_subject` either). The question's
    word in both turns ties them, and the later is what holds now. One turn at most, after
    the kept hits; the gate read the floors as before, so an abstention stays one.
    """
    said = [h.chunk.created_at for h in kept if h.chunk.id in keyword and _later_role(h.chunk)]
    if not said:
        return kept
    oldest, kept_ids = min(said), {h.chunk.id for h in kept}
    found = ranked.hits_where(
        lambda c, s: (
            c.id in keyword and c.id not in kept_ids and _later_role(c) and c.created_at > oldest
        )
    )
    return [*kept, *found[:1]]


def _later_role(chunk: Chunk) -> bool:
    return chunk.role in LATER_ROLES
