"""A large user's chunk heads in RAM (memory/store/chunk_heads.py) through the real proxy.

`chunk_heads_from: 1` holds every user's heads (by default users of 20k vectors or more):
a turn stored after they were read is recalled from them, a forgotten user's turns are never
recalled, and a forgotten user who talks again is recalled only their new words. The real
embedder, the official SDK, SQLite.
"""

import pytest

from tests.e2e.test_memory_api import KAYAK, KAYAK_QUESTION, PASTA, api, chat, recalled_block

PASTA_QUESTION = "What do I put in my carbonara, which cheese and which meat?"


@pytest.fixture
def heads_proxy(make_proxy):
    return make_proxy(settings={"capture_facts": False, "chunk_heads_from": 1})


def heads_of(proxy, user):
    """The user's chunk ids and which of them the heads in RAM answered for."""
    store = proxy.layer.store
    ids = list(store.chunks(user, range(1, 1000)))
    store.chunk_heads(user, ids, (), True)  # read them if they are not held (forgotten)
    assert store.heads.wait(user, timeout=30)
    return ids, store.chunk_heads(user, ids, (), True)[1]


def test_a_turn_stored_after_the_heads_were_read_is_recalled_from_them(heads_proxy, upstream):
    chat(heads_proxy, "alice", KAYAK)
    heads_proxy.flush()
    assert KAYAK in recalled_block(heads_proxy, upstream, "alice", KAYAK_QUESTION)
    assert heads_proxy.layer.store.heads.wait("alice", timeout=30)
    chat(heads_proxy, "alice", PASTA)
    heads_proxy.flush()
    ids, from_ram = heads_of(heads_proxy, "alice")
    assert len(ids) == 4 and from_ram == set(ids)  # the new turn's chunks came from RAM
    block = recalled_block(heads_proxy, upstream, "alice", PASTA_QUESTION)
    assert block is not None and PASTA in block  # with its text


def test_a_forgotten_user_is_recalled_only_what_they_said_since(heads_proxy, upstream):
    chat(heads_proxy, "alice", KAYAK)
    heads_proxy.flush()
    assert KAYAK in recalled_block(heads_proxy, upstream, "alice", KAYAK_QUESTION)
    assert heads_proxy.layer.store.heads.wait("alice", timeout=30)
    assert api(heads_proxy, "DELETE", "/v1/memory", "alice").status_code == 200
    assert recalled_block(heads_proxy, upstream, "alice", KAYAK_QUESTION) is None
    # The new turn's chunks may be given the forgotten ones' ids (SQLite reuses freed ids).
    chat(heads_proxy, "alice", "I sold my kayak last week; I keep a paddleboard at the marina")
    heads_proxy.flush()
    block = recalled_block(heads_proxy, upstream, "alice", KAYAK_QUESTION)
    assert block is not None and "paddleboard" in block
    assert "berth number 14" not in block
    ids, from_ram = heads_of(heads_proxy, "alice")
    assert from_ram == set(ids) and len(ids) == 2
