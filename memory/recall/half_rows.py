"""Some rows of a float16 matrix as float32, fast: the rescoring step of a large user's search.

A user past `memory.recall.vectors.HALF_FROM` vectors is held in float16, and each search
reads the 2,000 rows its binary codes found nearest, cast to float32. numpy casts float16
one element at a time: 1.3-1.7 ms for 2,000 × 384 on this project's 2-core machine, most of
a 100k-chunk search. onnxruntime, already loaded for the embedding model, gathers and casts
with its vectorised kernels (F16C): 0.15 ms for the same rows, the same float32 bits (a cast
from float16 is exact; `tests/memory/recall/test_half_rows.py` compares them with numpy's).

The graph is two nodes, `Gather` then `Cast`, built in memory once per process; it reads the
matrix in place (no copy of it per run). Without onnxruntime, numpy does it as before.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def half_rows(matrix: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """`matrix[positions]` as a new float32 array (C order): `matrix` is float16 (n, dim),
    C-contiguous; `positions` integers in [0, n)."""
    session = _session()
    if session is None or not matrix.flags.c_contiguous or len(positions) == 0:
        cast: np.ndarray = matrix[positions].astype(np.float32)
        return cast
    indices = np.ascontiguousarray(positions, dtype=np.int64)
    rows: np.ndarray = session.run(None, {"matrix": matrix, "positions": indices})[0]
    return rows


@lru_cache(maxsize=1)
def _session() -> Any:
    """The Gather + Cast session (one thread: it runs on the searching thread), or None."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [
                helper.make_node("Gather", ["matrix", "positions"], ["picked"], axis=0),
                helper.make_node("Cast", ["picked"], ["rows"], to=TensorProto.FLOAT),
            ],
            "half_rows",
            [
                helper.make_tensor_value_info("matrix", TensorProto.FLOAT16, [None, None]),
                helper.make_tensor_value_info("positions", TensorProto.INT64, [None]),
            ],
            [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [None, None])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8  # what onnxruntime builds of the last years all read
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        return ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # no onnxruntime or onnx, or one that refuses the graph
        logger.warning("float16 rows are cast by numpy (slower): %s", exc)
        return None
