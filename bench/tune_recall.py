"""Fast LoCoMo recall tuning: the block `MemoryLayer.recall` builds, scored in-process.

`bench/locomo.py` measures recall through the real proxy; replaying and asking through HTTP
takes minutes. This script reuses a database that `bench/locomo.py --db PATH` replayed,
copies it (recall marks facts as injected), and calls `MemoryLayer.recall` directly for each
question with the same request the proxy would build (a system prompt and the question, a
new session, a 128k window: tier 0). Query embeddings are cached on disk, so a variant over
the first five conversations takes seconds. Scores are locomo.py's: hit = some evidence
turn's text is inside the block, all = every one is (categories 1-4, audited and original
labels). Settings are overridden with `--set name=value`; tune on conversations 0-4 only.

    PYTHONPATH=. /work/venv/bin/python bench/tune_recall.py --db /tmp/locomo.db \\
        --conversations 0-4 --set speaker_weight=0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import sqlean
import threadpoolctl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.locomo import (  # noqa: E402
    MODEL,
    SYSTEM,
    Conversation,
    Question,
    load,
    norm,
    parse_range,
)
from memory import BLOCK_END, BLOCK_START, Settings, count_message_tokens  # noqa: E402
from memory.embedding import FastEmbedder  # noqa: E402
from memory.layer import MemoryLayer, RecallRequest  # noqa: E402


def cache_path(model_name: str) -> Path:
    """Query vectors are cached per embedding model (the name the database's vectors carry)."""
    slug = "".join(c if c.isalnum() else "-" for c in model_name)
    return Path(tempfile.gettempdir()) / f"moim-tune-queries-{slug}.npz"


class CachedEmbedder:
    """The bundled model behind a disk cache of query vectors (documents are never embedded)."""

    def __init__(self, settings: Settings, name: str) -> None:
        self._model: FastEmbedder | None = None
        self._settings = settings
        self.cache: dict[str, np.ndarray] = {}
        self._path = cache_path(name)
        if self._path.exists():
            with np.load(self._path) as saved:
                keys = json.loads(str(saved["keys"]))
                self.cache = dict(zip(keys, saved["vectors"], strict=True))
        self.misses = 0
        self.name = name  # as stored with the vectors, so they are not dropped
        self.dim = 384

    def embed_documents(self, texts: Any) -> np.ndarray:
        raise RuntimeError("the tuning database must be fully indexed")

    def embed_documents_words(self, texts: Any) -> Any:
        raise RuntimeError("the tuning database must be fully indexed")

    def embed_query_words(self, text: str, owner: str = "") -> Any:
        """The query's vector and word vectors (memory/recall/vocabulary.py): the model runs
        for each question (its words are not cached on disk); the vector is the cached one."""
        model = self._loaded()
        vector, words = model.embed_query_words(text)
        if text not in self.cache:
            self.cache[text] = vector
            self.misses += 1
        return self.cache[text], words

    def _loaded(self) -> FastEmbedder:
        if self._model is None:
            self._model = FastEmbedder(self._settings.embedding_model, 16, 1)
        if self._model.name != self.name:
            raise SystemExit(
                f"the database's vectors are {self.name}, the model is "
                f"{self._model.name}: re-index it or fill the query cache"
            )
        return self._model

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        if text not in self.cache:
            self.cache[text] = self._loaded().embed_query(text)
            self.misses += 1
        return self.cache[text]

    def save(self) -> None:
        if self.misses:
            keys = list(self.cache)
            vectors = np.stack([self.cache[k] for k in keys])
            np.savez(self._path, keys=json.dumps(keys), vectors=vectors)


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`name=value` pairs typed by the Settings field's default."""
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    defaults = Settings()
    out: dict[str, Any] = {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        if name not in fields:
            raise SystemExit(f"unknown setting {name}")
        default = getattr(defaults, name)
        if isinstance(default, bool):
            out[name] = raw.lower() in ("1", "true", "yes")
        elif isinstance(default, int | float):
            out[name] = type(default)(raw)
        else:
            out[name] = raw
    return out


def ask(layer: MemoryLayer, conv: Conversation, q: Question) -> dict[str, Any]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q.text}]
    request = RecallRequest(
        conv.sample_id,
        f"{conv.sample_id}-q{q.index}",
        MODEL,
        messages,
        count_message_tokens(messages, MODEL),
        128_000,
    )
    started = time.perf_counter()
    found = layer.recall(request)
    ms = (time.perf_counter() - started) * 1000
    text = found.block.text if found.block else ""
    block = norm(text.split(BLOCK_START, 1)[1].split(BLOCK_END, 1)[0]) if text else ""
    inside = {d: norm(conv.turns[d]) in block for d in {*q.evidence, *q.audited}}
    return {
        "inside": inside,
        "tokens": found.block.tokens if found.block else 0,
        "ms": ms,
        "block": block,
    }


def layer_on(db: Path, overrides: dict[str, Any]) -> tuple[MemoryLayer, CachedEmbedder]:
    """A MemoryLayer on `db` (a copy: recall marks facts as injected) with `overrides`, and
    the cached query embedder of the model its vectors carry."""
    settings = dataclasses.replace(Settings(db_path=db), **overrides)
    stored = (
        sqlean.connect(str(db))
        .execute("SELECT value FROM meta WHERE key = 'embedding_model'")
        .fetchone()
    )
    embedder = CachedEmbedder(settings, stored[0] if stored else settings.embedding_model)
    layer = MemoryLayer(settings, lambda _: embedder)  # type: ignore[arg-type,return-value]
    layer.wait_for_lexical_index()  # the copy has no lexical index beside it: rebuilt
    return layer, embedder


def score(qs: list[Question], audited: bool) -> tuple[int, float, float]:
    rows = [(q, q.audited if audited else q.evidence) for q in qs]
    rows = [(q, e) for q, e in rows if e]
    hit = sum(any(q.result["inside"][d] for d in e) for q, e in rows)
    every = sum(all(q.result["inside"][d] for d in e) for q, e in rows)
    return len(rows), hit / max(len(rows), 1), every / max(len(rows), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a replayed locomo.py database")
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--set", action="append", default=[], help="Settings override")
    parser.add_argument("--save", type=Path, help="write per-question results here (JSON)")
    parser.add_argument("--quiet", action="store_true", help="one summary line only")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does (proxy/runtime.py)
    convs = load(parse_range(args.conversations), None)
    overrides = parse_sets(args.set)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "locomo.db"
        shutil.copyfile(args.db, db)
        layer, embedder = layer_on(db, overrides)
        qs = [q for c in convs for q in c.questions if q.evidence or q.audited]
        started = time.perf_counter()
        for conv in convs:
            for q in conv.questions:
                if q.evidence or q.audited:
                    q.result = ask(layer, conv, q)
        seconds = time.perf_counter() - started
        embedder.save()
    cats = [q for q in qs if q.category in (1, 2, 3, 4)]
    n, hit, every = score(cats, True)
    _, ohit, oevery = score(cats, False)
    tokens = sum(q.result["tokens"] for q in qs) / len(qs)
    ms = np.percentile([q.result["ms"] for q in qs], [50, 95])
    label = " ".join(args.set) or "defaults"
    print(
        f"{label}: audited hit {hit:.3f} all {every:.3f} | original hit {ohit:.3f} all "
        f"{oevery:.3f} | n {n} | tokens {tokens:.0f} | ms p50 {ms[0]:.1f} p95 {ms[1]:.1f} "
        f"| {seconds:.0f} s"
    )
    if not args.quiet:
        for cat in (1, 2, 3, 4, 5):
            n, hit, every = score([q for q in qs if q.category == cat], True)
            print(f"  category {cat}: n {n} hit {hit:.3f} all {every:.3f}")
        print("  questions by conversation:", dict(Counter(q.conv for q in cats)))
    if args.save:
        args.save.write_text(
            json.dumps(
                [
                    {
                        "conv": q.conv,
                        "qa": q.index,
                        "category": q.category,
                        "text": q.text,
                        "evidence": q.evidence,
                        "audited": q.audited,
                        **q.result,
                    }
                    for q in qs
                ]
            )
        )


if __name__ == "__main__":
    main()
