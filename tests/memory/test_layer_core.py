"""memory/layer_core.py: the recall pool is sized from the machine's cores, and recalls begun
past its size wait for a thread and give what a recall gives."""

import os

from memory import MemoryLayer, RecallRequest, Settings, Turn
from memory.layer_core import recall_threads
from tests.memory.hash_embedder import HashEmbedder

NOW = 1_700_000_000.0


def test_two_recall_threads_a_core_from_two_to_eight():
    assert [recall_threads(n) for n in (1, 2, 3, 4, 8, 64)] == [2, 4, 6, 8, 8, 8]
    assert recall_threads(None) == 2  # os.cpu_count() may not know


def test_recalls_begun_past_the_pools_size_all_give_what_a_recall_gives(tmp_path):
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), lambda _: HashEmbedder())
    user = {"role": "user", "content": "I keep my red kayak at the marina in Porto"}
    answer = {"role": "assistant", "content": "Noted, the marina."}
    layer.remember(Turn("ana", "s-1", "gpt-4o-mini", (user,), answer, NOW - 3600))
    messages = [{"role": "user", "content": "Where do I keep the kayak?"}]
    request = RecallRequest("ana", "s-new", "gpt-4o-mini", messages, 40, 128_000)
    plain = layer.recall(request, NOW)
    assert plain.block is not None
    begun = [layer.begin_recall("ana", messages, NOW) for _ in range(3 * recall_threads(8))]
    assert all(pending is not None for pending in begun)
    for pending in begun:
        assert layer.recall(request, NOW, pending).block == plain.block
    assert layer._ahead._max_workers == recall_threads(os.cpu_count())
