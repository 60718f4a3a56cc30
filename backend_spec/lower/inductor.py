"""Lowering to x86 inductor's int8 kernels (oneDNN), and what the lowering shows per op.

``torch.compile`` of the converted model lowers its quantized patterns to oneDNN int8 kernels
only with ``torch._inductor.config.freezing``: the weight-prepack passes replace
``dequantize -> conv/linear`` with ``onednn.qconv_pointwise`` / ``qlinear_pointwise`` (int8
in), and the lowering patterns fold post-ops, adds and output quantizes into them. The
post-grad graph is kept (``post_grad_custom_post_pass``) and every node of it that is such a
kernel, or a lowering pattern's replacement (whose ``Match`` lists the nodes it took), is traced
back to the annotated graph's node names (``from_node``): that attributes each kernel to the
spec's quantized op. ``counters["inductor"]`` gives the same facts as totals.

A conv or linear (or any op with a quantized weight) must reach a oneDNN int8 kernel. The other
quantized ops (pooling, cat, flatten, add, mul) have no oneDNN kernel of their own: inductor
generates a C++ loop that reads the uint8 tensor and dequantizes in the loop; they are judged
int8 when a dequantize (or an int8 kernel) still feeds them in the post-grad graph.

FX graph caching is off so that the passes (and the counters) run on every compile; the C++
kernels inductor builds are cached by their source in ``TORCHINDUCTOR_CACHE_DIR``. On torch
2.14 the x86 int8 passes live in torchao: importing torchao's ``x86_inductor_quantizer``
registers them (:func:`register_passes`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from backend_spec._torch import torch
from backend_spec.lower import measure
from backend_spec.lower.constraints import crash_reason, known_reason
from backend_spec.lower.quantized import (
    Quantized,
    QuantizedOp,
    is_dequantize,
    is_quantize,
    source_names,
)
from backend_spec.lower.results import ModelResult, OpResult, blame_crash

TARGET = "inductor"
#: oneDNN int8 ops the x86 passes put in the graph (names as ``str(node.target)`` shows them).
_INT8_OPS = ("onednn.qconv", "onednn.qlinear", "quantized.max_pool2d", "onednn.qembedding")


@functools.cache
def register_passes() -> str:
    """Make sure the x86 int8 passes are registered; which code provides them."""
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True
    inductor_config.fx_graph_cache = False
    inductor_config.compile_threads = 1
    try:
        from torch._inductor.fx_passes import quantization

        if hasattr(quantization, "_register_qconv_weight_prepack"):
            return "torch"
    except ImportError:
        pass
    # torch 2.14: the passes moved to torchao; importing the quantizer registers them
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # noqa: F401

    return "torchao"


def lower_model(name: str, quantized: Quantized, *, timing: bool = True) -> ModelResult:
    """Compile ``quantized`` (and its float model); judge each quantized op, compare, time."""
    from torch._dynamo.utils import counters

    register_passes()
    result = ModelResult(name, TARGET)
    inputs = quantized.inputs
    counters.clear()
    torch._dynamo.reset()
    stage = "torch.compile"
    graphs: list[Any] = []
    try:
        with _post_grad_graphs(graphs), torch.no_grad():
            compiled = torch.compile(quantized.converted)
            output = measure.first_tensor(compiled(*inputs))
            result.sqnr_db, result.max_abs = measure.compare(quantized.output, output)
            stage = "timing"
            if timing:
                result.int8_us = measure.median_us(lambda: compiled(*inputs))
    except Exception as exc:  # a crash of the compiler or of its kernels is the finding
        result.error = f"{stage}: {type(exc).__name__}: {_first_line(exc)}"[:400]
        result.error_reason = crash_reason(TARGET, (op.facts for op in quantized.ops))
    result.counters = _counters(counters["inductor"])
    if result.diverged:
        result.host_note = _host_reason(quantized.ops)
    if graphs:  # the kernels may crash after the passes ran: judge what they made
        judge(result, quantized, graphs)
    if result.error:
        blame_crash(result, quantized.ops, TARGET)
    if result.error or (timing and quantized.ops):  # no quantized op: nothing to compare
        _float(result, quantized, timing)
    return result


def _host_reason(ops: list[QuantizedOp]) -> str:
    """What about this host explains diverging outputs, from the table's host rows."""
    vnni = bool(getattr(torch.cpu, "_is_vnni_supported", lambda: True)())
    reasons = [known_reason(TARGET, replace(op.facts, host_vnni=vnni), host=True) for op in ops]
    return "; ".join(r for r in dict.fromkeys(reasons) if r)


def _float(result: ModelResult, quantized: Quantized, timing: bool) -> None:
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            compiled = torch.compile(quantized.float_model)
            compiled(*quantized.inputs)
            if timing:
                result.fp32_us = measure.median_us(lambda: compiled(*quantized.inputs))
    except Exception as exc:
        if result.error:
            result.skipped = f"the float model does not compile either: {type(exc).__name__}"
    finally:
        torch._dynamo.reset()


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    useful = [line for line in lines if "Error" in line or "should" in line]
    return (useful or lines or [""])[-1] if useful else (lines[0] if lines else "")


def _counters(found: Any) -> dict[str, int]:
    return {
        key: int(value)
        for key, value in sorted(found.items())
        if key.startswith("q") and key.endswith("_count")
    }


@contextlib.contextmanager
def _post_grad_graphs(graphs: list[Any]) -> Iterator[None]:
    """Keep in ``graphs`` the post-grad graphs compiled inside the block (after the x86 int8
    passes ran)."""
    import torch._inductor.config as inductor_config

    saved = inductor_config.post_grad_custom_post_pass

    def keep(graph: Any) -> None:
        graphs.append(graph)
        if saved is not None:
            saved(graph)

    inductor_config.post_grad_custom_post_pass = keep
    try:
        yield
    finally:
        inductor_config.post_grad_custom_post_pass = saved


@dataclass
class Kernels:
    """What the post-grad graphs hold: each int8 kernel (in graph order) with every name its
    provenance gives, the names that read or feed int8 data, and every name still present."""

    found: list[tuple[str, set[str]]] = field(default_factory=list)
    int8_neighbours: set[str] = field(default_factory=set)
    present: set[str] = field(default_factory=set)


def kernels(graphs: list[Any]) -> Kernels:
    made = Kernels()
    for graph in graphs:
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            made.present.update(_names(node))
            kernel = _kernel_of(node)
            if kernel:
                made.found.append((kernel, set(_covered(node))))
            elif any(_int8(a) for a in [*node.all_input_nodes, *node.users]):
                made.int8_neighbours.update(_names(node))
    return made


def attribute(ops: list[QuantizedOp], found: list[tuple[str, set[str]]]) -> dict[int, str]:
    """Op index -> its int8 kernel. By name first (a kernel is named after a node of the op or
    its output quantize); then kernels no name claimed go to the weighted ops of their kind
    (conv, linear) still without one, in graph order: a fused kernel may be named after a
    post-op outside the spec's chain (conv + add lowered with the relu after it)."""
    assigned: dict[int, str] = {}
    used: set[int] = set()
    for index, op in enumerate(ops):
        for number, (kernel, names) in enumerate(found):
            if names.intersection(op.names):
                assigned[index] = kernel
                used.add(number)
                break
    for kind in ("conv", "linear"):
        free = [n for n, (kernel, _) in enumerate(found) if n not in used and kind in kernel]
        waiting = [i for i, op in enumerate(ops) if i not in assigned and _kind(op) == kind]
        for index, number in zip(waiting, free, strict=False):
            assigned[index] = found[number][0]
            used.add(number)
    return assigned


def _kind(op: QuantizedOp) -> str:
    return next((k for t in op.targets for k in ("conv", "linear") if k in t), "")


def _int8(node: Any) -> bool:
    """Whether ``node`` carries int8 data: a quantize, a dequantize or an int8 kernel (a view
    or pooling between them, which inductor may move the dequantize past, reads int8)."""
    return is_dequantize(node) or is_quantize(node) or bool(_kernel_of(node))


def _kernel_of(node: Any) -> str:
    if getattr(node, "op", "") != "call_function":
        return ""
    target = node.target
    if isinstance(target, functools.partial):  # a lowering pattern's replacement
        name = getattr(target.func, "__name__", "")
        return f"lowered {name}" if name.startswith("q") else ""
    text = str(target)
    return next((text for op in _INT8_OPS if op in text), "")


def _covered(node: Any) -> list[str]:
    """Annotated names of ``node`` and, for a lowering's replacement, of the nodes it took."""
    names = _names(node)
    target = node.target
    if isinstance(target, functools.partial):
        for arg in target.args:
            for taken in getattr(arg, "nodes", ()):
                names += _names(taken)
    return names


def _names(node: Any) -> list[str]:
    """Every name of ``node``'s provenance: a kernel is named after the last node it replaced
    (an output quantize, a post-op), at whichever graph that node was made."""
    return [node.name, *source_names(node)]


def judge(result: ModelResult, quantized: Quantized, graphs: list[Any]) -> None:
    """Fill ``result``'s ops, placement and what stayed in fp32 from the post-grad graphs."""
    ops = quantized.ops
    made = kernels(graphs)
    assigned = attribute(ops, made.found)
    result.ops = [_judge_op(op, assigned.get(i, ""), made) for i, op in enumerate(ops)]
    by_node = {name: v.kernel for v in result.ops for name in v.op.split("+")}
    for name in sorted(quantized.node_names):
        if name in by_node:
            result.placement[name] = by_node[name]
        elif name in made.present:
            result.placement[name] = "inductor C++ kernel"
    result.outside = [
        f"{op.name} ({op.entry})"
        for op, verdict in zip(ops, result.ops, strict=True)
        if not verdict.ok
    ]


def _judge_op(op: QuantizedOp, kernel: str, made: Kernels) -> OpResult:
    if kernel:
        return OpResult(op.name, op.targets, op.entry, op.origin, kernel, True)
    weighted = op.facts.weight is not None or _kind(op) != ""
    if not weighted and not any(name in made.present for name in op.nodes):
        return OpResult(op.name, op.targets, op.entry, op.origin, "removed", True)
    if not weighted and any(name in made.int8_neighbours for name in op.names):
        return OpResult(op.name, op.targets, op.entry, op.origin, "cpp (int8 in)", True)
    known = known_reason(TARGET, op.facts)
    problem = "no x86 int8 pattern lowered it (the op runs in fp32)"
    return OpResult(
        op.name,
        op.targets,
        op.entry,
        op.origin,
        "fp32",
        False,
        f"{problem}: {known}" if known else problem,
    )
