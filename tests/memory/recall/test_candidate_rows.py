"""memory/recall/candidate_rows.py: a large user's recall, ranked from the heads in RAM, finds
what it finds from SQLite's rows: the same hits with their text, the same left out.

Real SQLite, the deterministic 8-dimension embedder; `chunk_heads_from=1` holds every user's
heads (the default holds users of 20k vectors or more).
"""

import pytest

from memory.ingest.identity import content_hash
from memory.ingest.turns import Turn, index_pending, store_turn
from memory.recall.candidate_rows import CandidateRows
from memory.recall.retrieval import retrieve
from memory.recall.vectors import VectorIndex
from memory.records import Hit
from memory.settings import Settings
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder

NOW = 1_700_000_000.0
TURNS = [
    "I keep my red kayak at the marina in Porto",
    "My carbonara uses guanciale and pecorino",
    "The outage INC-48213 was the DNS resolver again",
    "We moved the kayak to the lake house in June",
    "Pecorino is saltier than parmesan, so less salt in the water",
    "The marina charges 40 euros a month for the kayak",
    "My sister Ana lives in Lyon and paints",
    "The DNS resolver runs on 10.0.3.7 since the move",
    "I paddle the kayak on Sundays when the wind is low",
    "Guanciale is cured pork cheek, not bacon",
    "Ana visited Porto in May and saw the marina",
    "The lake house has a dock for the kayak",
]
QUERIES = [
    "where is my kayak kept",
    "what goes in my carbonara",
    "what was INC-48213 about",
    "where does Ana live",
    "how much is the marina",
]


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "moim.db")
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    for n, text in enumerate(TURNS):
        message = {"role": "user", "content": text}
        reply = {"role": "assistant", "content": f"Noted, {text.split()[-1]}."}
        turn = Turn("ann", f"s-{n // 3}", "gpt-4o-mini", (message,), reply, NOW - 86_400 * n)
        store_turn(store, turn)
    index_pending(
        store, HashEmbedder(), VectorIndex(store.user_vectors), Settings(db_path=tmp_path)
    )
    return store


def recall(store, tmp_path, query, heads_from, exclude=(), gate=True):
    settings = Settings(db_path=tmp_path / "moim.db", chunk_heads_from=heads_from, min_standout=0.3)
    index = VectorIndex(store.user_vectors)
    return retrieve(store, index, HashEmbedder(), settings, "ann", query, exclude, NOW, gate=gate)


def heads_held(store, tmp_path):
    recall(store, tmp_path, QUERIES[0], 1)
    assert store.heads.wait("ann", timeout=10)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("gate", [True, False])
def test_recall_from_the_heads_finds_what_the_rows_give(store, tmp_path, query, gate):
    heads_held(store, tmp_path)
    exclude = {content_hash({"role": "user", "content": TURNS[3]})}
    rows = recall(store, tmp_path, query, 0, exclude, gate)
    heads = recall(store, tmp_path, query, 1, exclude, gate)
    assert heads.hits == rows.hits
    assert all(h.chunk.text for h in heads.hits)  # the kept hits' text was read
    assert (heads.abstained, heads.withheld) == (rows.abstained, rows.withheld)
    assert heads.left_out == rows.left_out  # the inspector's list, texts and all
    assert heads.present == rows.present


def test_a_present_turn_is_told_present_with_its_text(store, tmp_path):
    heads_held(store, tmp_path)
    exclude = {content_hash({"role": "user", "content": TURNS[0]})}
    found = recall(store, tmp_path, "where is my kayak kept", 1, exclude)
    assert [p.chunk.text for p in found.present] == [TURNS[0]]
    assert TURNS[0] not in [h.chunk.text for h in found.hits]


def test_a_chunk_deleted_before_its_text_is_read_is_left_out_of_the_block(store, tmp_path):
    heads_held(store, tmp_path)
    rows = CandidateRows(store, "ann", (), hold=True)
    chunks = rows.read(list(range(1, 30)))
    assert rows.partial and not any(c.text for c in chunks.values())
    hits = [Hit(c, 1.0, None, None, None) for c in chunks.values()]
    store.delete_user("ann")
    assert rows.whole(hits) == []  # nothing forgotten reaches a block
    assert rows.whole(hits, keep_gone=True) == hits  # the inspector's list keeps its length


def test_hits_made_whole_are_not_read_again(store, tmp_path):
    """Recall makes the kept hits whole for the gate (a question naming an identifier), then
    the kept hits and the later turns for the block: the first ones are not read twice."""
    heads_held(store, tmp_path)
    rows = CandidateRows(store, "ann", (), hold=True)
    chunks = rows.read(list(range(1, 30)))
    whole = rows.whole([Hit(c, 1.0, None, None, None) for c in chunks.values()])
    assert whole and all(h.chunk.text for h in whole)
    store.delete_user("ann")
    assert rows.whole(whole) == whole  # a second read would have found them gone


SAY_NOTHING = ["Thanks!", "ok great", "haha 👍"]


@pytest.fixture
def chatty(store):
    """The store, with turns on the kayak that say nothing between those that do."""
    for n, text in enumerate(SAY_NOTHING):
        message = {"role": "user", "content": text}
        reply = {"role": "assistant", "content": "The kayak club meets at the marina."}
        turn = Turn("ann", "s-9", "gpt-4o-mini", (message,), reply, NOW - 3_600 * n)
        store_turn(store, turn)
    index_pending(
        store, HashEmbedder(), VectorIndex(store.user_vectors), Settings(db_path=store.path)
    )
    return store


def recall_showing(store, tmp_path, query, shown):
    settings = Settings(db_path=tmp_path / "moim.db", chunk_heads_from=1, min_standout=0.3)
    index = VectorIndex(store.user_vectors)
    return retrieve(
        store, index, HashEmbedder(), settings, "ann", query, (), NOW, gate=False, shown=shown
    )


@pytest.mark.parametrize("shown", [1, 2, 3, 5, 40])
@pytest.mark.parametrize("query", [*QUERIES, "thanks, and the kayak?"])
def test_hits_past_those_shown_read_later_are_the_hits_read_at_once(chatty, tmp_path, query, shown):
    heads_held(chatty, tmp_path)
    now = recall_showing(chatty, tmp_path, query, None)
    later = recall_showing(chatty, tmp_path, query, shown)
    assert later.hits[:shown] == list(now.hits[:shown])  # read first, in the same order
    assert (later.abstained, later.withheld) == (now.abstained, now.withheld)
    assert list(later.hits) == list(now.hits) and len(later.hits) == len(now.hits)
    assert later.left_out == now.left_out  # the empty turns told as before
    assert set(later.empty) == set(now.empty)


def test_only_the_hits_shown_are_read_before_the_rest_is_asked_for(chatty, tmp_path):
    heads_held(chatty, tmp_path)
    everything = recall_showing(chatty, tmp_path, "where is my kayak kept", None)
    assert len(everything.hits) > 3 and set(everything.empty)  # some said nothing
    found = recall_showing(chatty, tmp_path, "where is my kayak kept", 2)
    first = found.hits[:2]
    chatty.delete_user("ann")  # what is read from now on is gone
    assert first == list(everything.hits[:2])  # those were read with the search
    assert len(found.hits) == 2  # the rest, read now, are left out as deleted ones are
