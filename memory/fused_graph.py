"""The converted MiniLM's graph in fewer nodes, with the same arithmetic (the same vectors).

The quantized graph (`memory/bundled_model.py`) runs each layer's attention as ~40 small
nodes as the exporter wrote it: three projections, reshapes and transposes into heads, the
key turned by three more, a mask built from ranges and gathers, a NaN guard after the softmax.
onnxruntime runs one node at a time, and a question of ~15 tokens spends much of its run
between nodes. Two rewrites, each giving the same floats:

- the three projections of one quantized input (query, key, value) become one integer matrix
  product over the three weight matrices side by side, then a `Split`: integer sums are exact,
  and each column keeps its own scale and bias;
- each layer's attention becomes one `com.microsoft.MultiHeadAttention` with the padding mask,
  whose CPU kernel runs the same steps as the graph did (the scaled product of query and key
  as one matrix product with the two scale factors' product, what onnxruntime's own fusion
  made of them; the mask's large negative for padding; softmax; the product with the values).
  Without a mask it would take another path (flash attention) with other sums.

A rewrite is kept only where `same_outputs` finds the two graphs' hidden states equal bit for
bit (`bundled_model._convert`), so another onnxruntime that computes either differently keeps
the plain graph: stored vectors never change under a store.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Lengths of the probe texts (token ids, CLS and SEP included): short, one past the model's
# 256-token truncation, and a padded batch of two.
_PROBE_LENGTHS = (3, 17, 64, 257)


class _NoMatch(Exception):
    """The graph is not the one these rewrites were written for."""


def fuse(model: onnx.ModelProto) -> bool:
    """Rewrite `model` in place; False (and `model` unusable) if its graph does not match."""
    graph = model.graph
    try:
        _fuse_attention(graph)
        _merge_projections(graph)
        _drop_unused(graph)
        _sort(graph)
    except (_NoMatch, KeyError, IndexError, ValueError):
        return False
    return True


def same_outputs(plain: Path, fused: Path) -> bool:
    """Whether the two models' last hidden states are equal bit for bit on the probe inputs,
    one text at a time and as a padded batch, on sessions built as fastembed builds them."""
    import onnxruntime as ort

    def session(path: Path) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    first, second = session(plain), session(fused)
    return all(
        np.array_equal(first.run(None, feed)[0], second.run(None, feed)[0]) for feed in _probes()
    )


def _probes() -> Iterable[dict[str, np.ndarray]]:
    ids = np.random.default_rng(15).integers(1000, 30000, size=max(_PROBE_LENGTHS))
    for length in _PROBE_LENGTHS:
        row = np.concatenate([[101], ids[: length - 2], [102]])[None, :].astype(np.int64)
        yield _feed(row, np.ones_like(row))
    batch = np.zeros((2, 17), dtype=np.int64)  # the second text padded with zeros
    batch[0] = np.concatenate([[101], ids[:15], [102]])
    batch[1, :9] = np.concatenate([[101], ids[20:27], [102]])
    yield _feed(batch, (batch != 0).astype(np.int64))


def _feed(ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


class _Graph:
    """Who makes and who reads each tensor, and the constants, of a graph being rewritten."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.maker: dict[str, onnx.NodeProto] = {
            name: node for node in graph.node for name in node.output
        }
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def made_by(self, name: str, op: str) -> onnx.NodeProto:
        node = self.maker.get(name)
        if node is None or node.op_type != op:
            raise _NoMatch(f"{name} is not made by {op}")
        return node

    def read_by(self, name: str, op: str) -> onnx.NodeProto:
        found = [node for node in self.readers.get(name, []) if node.op_type == op]
        if len(found) != 1:
            raise _NoMatch(f"{name} is not read by one {op}")
        return found[0]

    def constant(self, name: str) -> np.ndarray:
        if name not in self.constants:
            raise _NoMatch(f"{name} is not a constant")
        return self.constants[name]

    def add_constant(self, name: str, value: np.ndarray) -> None:
        self.graph.initializer.append(numpy_helper.from_array(value, name))

    def read_instead(self, old: str, new: str) -> None:
        """Every reader of `old` reads `new` (the nodes that made `old` become unused)."""
        for node in self.graph.node:
            for position, name in enumerate(node.input):
                if name == old:
                    node.input[position] = new


def _perm(node: onnx.NodeProto) -> list[int]:
    return [int(p) for a in node.attribute if a.name == "perm" for p in a.ints]


def _fuse_attention(graph: onnx.GraphProto) -> None:
    """Each Softmax's attention, from the projections to the heads joined again, as one
    MultiHeadAttention node."""
    g = _Graph(graph)
    softmaxes = [node for node in graph.node if node.op_type == "Softmax"]
    if not softmaxes:
        raise _NoMatch("no attention")
    mask = "attention_mask_int32"
    graph.node.append(helper.make_node("Cast", ["attention_mask"], [mask], to=TensorProto.INT32))
    for softmax in softmaxes:
        masked = g.made_by(softmax.input[0], "Add")
        scores = g.made_by(masked.input[0], "MatMul")
        fill = g.made_by(masked.input[1], "Where")
        if float(g.constant(fill.input[1])) != 0.0:
            raise _NoMatch("the mask does not add zero where attended")
        query_scaled = g.made_by(scores.input[0], "Mul")
        key_scaled = g.made_by(scores.input[1], "Mul")
        factor = np.float32(g.constant(query_scaled.input[1]))
        if np.float32(g.constant(key_scaled.input[1])) != factor:
            raise _NoMatch("query and key scaled differently")
        heads = g.made_by(g.made_by(query_scaled.input[0], "Transpose").input[0], "Reshape")
        query = heads.input[0]
        key = _key_projection(g, key_scaled.input[0])
        probabilities = softmax.output[0]
        guard = [node for node in g.readers[probabilities] if node.op_type == "IsNaN"]
        if guard:  # Where(IsNaN(p), 0, p): p itself, as a softmax over finite scores has no NaN
            probabilities = g.read_by(guard[0].output[0], "Where").output[0]
        weighted = g.read_by(probabilities, "MatMul")
        value = g.made_by(g.made_by(weighted.input[1], "Transpose").input[0], "Reshape").input[0]
        joined = g.read_by(g.read_by(weighted.output[0], "Transpose").output[0], "Reshape")
        head_size = int(g.constant(g.made_by(heads.input[1], "Concat").input[-1])[-1])
        hidden = int(g.constant(g.made_by(query, "Add").input[1]).shape[0])
        attention = helper.make_node(
            "MultiHeadAttention",
            [query, key, value, "", mask],
            [joined.output[0] + "_attention"],
            domain="com.microsoft",
            num_heads=hidden // head_size,
            scale=float(factor * factor),
            mask_filter_value=float(g.constant(fill.input[2])),
        )
        graph.node.append(attention)
        g.read_instead(joined.output[0], attention.output[0])


def _key_projection(g: _Graph, name: str) -> str:
    """The projection the key's heads were cut from: back through its reshapes and transposes
    (the exporter turned it by three) to the first reshape."""
    node = g.maker[name]
    while node.op_type in ("Reshape", "Transpose"):
        before = g.maker.get(node.input[0])
        if before is None or before.op_type not in ("Reshape", "Transpose"):
            break
        node = before
    if node.op_type != "Reshape":
        raise _NoMatch("the key is not cut from a projection")
    return str(node.input[0])


def _merge_projections(graph: onnx.GraphProto) -> None:
    """Each quantized input read by three integer matrix products (query, key, value) reads
    one over their weights side by side; a Split gives each its columns again."""
    g = _Graph(graph)
    for quantizer in [node for node in graph.node if node.op_type == "DynamicQuantizeLinear"]:
        products = [
            node
            for node in g.readers.get(quantizer.output[0], [])
            if node.op_type == "MatMulInteger"
        ]
        if len(products) != 3:
            continue
        weights, zero_points, scales, biases, outputs = [], [], [], [], []
        for product in products:
            as_float = g.read_by(product.output[0], "Cast")
            scaled = g.read_by(as_float.output[0], "Mul")
            biased = g.read_by(scaled.output[0], "Add")
            scale = g.made_by(scaled.input[1], "Mul")
            if scale.input[0] != quantizer.output[1] or product.input[2] != quantizer.output[2]:
                raise _NoMatch("a projection is scaled by another quantizer")
            weights.append(g.constant(product.input[1]))
            zero_points.append(g.constant(product.input[3]))
            scales.append(g.constant(scale.input[1]))
            biases.append(g.constant(biased.input[1]))
            outputs.append(biased.output[0])
        tag = quantizer.output[0] + "_qkv"
        columns = [len(b) for b in biases]
        for suffix, value in (
            ("weight", np.concatenate(weights, axis=1)),
            ("zero_point", np.concatenate(zero_points)),
            ("scale", np.concatenate(scales)),
            ("bias", np.concatenate(biases)),
            ("split", np.array(columns, dtype=np.int64)),
        ):
            g.add_constant(f"{tag}_{suffix}", value)
        quantized, scale_in, zero_in = quantizer.output
        graph.node.extend(
            [
                helper.make_node("Mul", [scale_in, f"{tag}_scale"], [f"{tag}_scales"]),
                helper.make_node(
                    "MatMulInteger",
                    [quantized, f"{tag}_weight", zero_in, f"{tag}_zero_point"],
                    [f"{tag}_sums"],
                ),
                helper.make_node("Cast", [f"{tag}_sums"], [f"{tag}_floats"], to=TensorProto.FLOAT),
                helper.make_node("Mul", [f"{tag}_floats", f"{tag}_scales"], [f"{tag}_scaled"]),
                helper.make_node("Add", [f"{tag}_scaled", f"{tag}_bias"], [f"{tag}_out"]),
                helper.make_node(
                    "Split",
                    [f"{tag}_out", f"{tag}_split"],
                    [f"{name}_part" for name in outputs],
                    axis=-1,
                ),
            ]
        )
        for name in outputs:
            g.read_instead(name, f"{name}_part")


def _drop_unused(graph: onnx.GraphProto) -> None:
    """Nodes and constants nothing reads on the way to the outputs go."""
    maker = {name: node for node in graph.node for name in node.output}
    live: set[int] = set()
    waiting = [output.name for output in graph.output]
    while waiting:
        node = maker.get(waiting.pop())
        if node is not None and id(node) not in live:
            live.add(id(node))
            waiting.extend(node.input)
    kept = [node for node in graph.node if id(node) in live]
    del graph.node[:]
    graph.node.extend(kept)
    read = {name for node in graph.node for name in node.input}
    constants = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(constants)


def _sort(graph: onnx.GraphProto) -> None:
    """Nodes in an order where each comes after what it reads (ONNX requires it)."""
    nodes = list(graph.node)
    maker = {name: index for index, node in enumerate(nodes) for name in node.output}
    waits = [{maker[name] for name in node.input if name in maker} for node in nodes]
    readers: dict[int, list[int]] = {}
    for index, before in enumerate(waits):
        for made in before:
            readers.setdefault(made, []).append(index)
    ready = [index for index, before in enumerate(waits) if not before]
    ordered: list[int] = []
    while ready:
        index = ready.pop()
        ordered.append(index)
        for after in readers.get(index, []):
            waits[after].discard(index)
            if not waits[after]:
                ready.append(after)
    if len(ordered) != len(nodes):
        raise _NoMatch("the graph has a cycle")
    del graph.node[:]
    graph.node.extend(nodes[index] for index in ordered)
