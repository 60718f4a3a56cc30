"""Lowering to ExecuTorch's XNNPACK delegate, and what the lowering shows per quantized op.

``to_edge_transform_and_lower(export(converted), partitioner=[XnnpackPartitioner()])`` splits
the program into delegate calls and what stays outside. Each delegate keeps the graph it took
(``LoweredBackendModule.original_module``): an op runs in XNNPACK's int8 kernels when its nodes
are in a delegate graph, every activation input there comes from a dequantize whose quantize is
in the delegate too (not from a float tensor, nor one quantized outside by a portable kernel),
and, when the spec quantizes its output, a quantize in the delegate reads it. XNNPACK fuses
such dq -> op -> q groups into one quantized operator; any other arrangement runs in float or
outside. The partitioner's own reasons (``WhyNoPartition`` debug records) are kept for the
report. The program then goes through ``to_executorch()`` and runs in the ExecuTorch runtime,
loaded fresh each time (a program that failed to initialise keeps failing).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from backend_spec._torch import torch
from backend_spec.lower import measure
from backend_spec.lower.constraints import crash_reason, known_reason
from backend_spec.lower.quantized import (
    Quantized,
    is_dequantize,
    is_quantize,
    source_names,
    trace_back,
)
from backend_spec.lower.results import ModelResult, OpResult, blame_crash

TARGET = "xnnpack"
_DELEGATE = "executorch_call_delegate"
_BOOKKEEPING = ("getitem", _DELEGATE)


def lower_program(exported: Any) -> tuple[Any, dict[str, str]]:
    """(edge program manager, the partitioner's reason per source node name)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with _why_not_partitioned() as reasons:
        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    return edge, reasons


class Program:
    """An ExecuTorch program loaded in the runtime, with the buffer it was loaded from: the
    runtime reads the buffer in place, so it must live as long as the program."""

    def __init__(self, edge: Any) -> None:
        from executorch.extension.pybindings.portable_lib import (
            _load_for_executorch_from_buffer,
        )

        self.buffer = edge.to_executorch().buffer
        self.module = _load_for_executorch_from_buffer(self.buffer)

    def forward(self, inputs: tuple) -> Any:
        return self.module.forward(inputs)


def load(edge: Any) -> Program:
    """The ExecuTorch program of ``edge``, loaded fresh in the runtime."""
    return Program(edge)


def lower_model(name: str, quantized: Quantized, *, timing: bool = True) -> ModelResult:
    """Lower ``quantized`` and its float model; judge each quantized op, compare and time."""
    result = ModelResult(name, TARGET)
    inputs = quantized.inputs
    stage = "export"
    try:
        # not under no_grad: its export keeps weights as constants the runtime cannot find
        exported = torch.export.export(quantized.converted, inputs)
        stage = "to_edge_transform_and_lower"
        edge, reasons = lower_program(exported)
        judge(result, quantized, edge.exported_program().graph_module, reasons)
        stage = "to_executorch"
        program = load(edge)
        stage = "runtime"
        output = measure.first_tensor(program.forward(inputs))
        result.sqnr_db, result.max_abs = measure.compare(quantized.output, output)
        if timing:
            result.int8_us = measure.median_us(lambda: program.forward(inputs))
    except Exception as exc:  # a crash of the lowering stack is the finding
        result.error = f"{stage}: {type(exc).__name__}: {exc}"[:400]
        result.error_reason = crash_reason(TARGET, (op.facts for op in quantized.ops))
        blame_crash(result, quantized.ops, TARGET)
    if result.error or (timing and quantized.ops):  # no quantized op: nothing to compare
        _float(result, quantized, timing)
    return result


def _float(result: ModelResult, quantized: Quantized, timing: bool) -> None:
    """The float model lowered the same way: the latency baseline, and the judge of a crash
    (when the float model does not lower either, the spec is not to blame)."""
    try:
        exported = torch.export.export(quantized.float_model, quantized.inputs)
        program = load(lower_program(exported)[0])
        if timing:
            result.fp32_us = measure.median_us(lambda: program.forward(quantized.inputs))
    except Exception as exc:
        if result.error:
            result.skipped = f"the float model does not lower either: {type(exc).__name__}"


def delegates(graph_module: Any) -> list[tuple[Any, dict[str, Any]]]:
    """Per delegate call of ``graph_module``, in call order: the ExportedProgram it took and,
    for each of that program's user inputs, the node of ``graph_module`` that feeds it."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and _DELEGATE in str(node.target):
            program = getattr(graph_module, node.args[0].target).original_module
            names = list(program.graph_signature.user_inputs)
            args = node.args[1:]
            by_name = {arg.name: arg for arg in args if isinstance(arg, torch.fx.Node)}
            feeds = {name: by_name.get(name, arg) for name, arg in zip(names, args, strict=False)}
            found.append((program, feeds))
    return found


def judge(
    result: ModelResult, quantized: Quantized, graph_module: Any, reasons: dict[str, str]
) -> None:
    """Fill ``result``'s ops, placement, delegates and what stayed outside from the lowered
    program."""
    ops = quantized.ops
    programs = delegates(graph_module)
    result.delegates = len(programs)
    wanted = quantized.node_names
    left = [
        node
        for node in graph_module.graph.nodes
        if node.op == "call_function" and not any(b in str(node.target) for b in _BOOKKEEPING)
    ]
    outside = trace_back(left, wanted)
    inside = [
        (index, program, feeds, trace_back(program.graph.nodes, wanted))
        for index, (program, feeds) in enumerate(programs)
    ]
    result.outside = [f"{node.name} ({_short(node.target)})" for node in left]
    for name in outside:
        result.placement[name] = "outside the delegate (portable kernel)"
    for index, _program, _feeds, found in inside:
        for name in found:
            result.placement.setdefault(name, f"xnnpack delegate {index}")
    result.ops = [_judge_op(op, outside, inside, reasons) for op in ops]


def _judge_op(op, outside, inside, reasons) -> OpResult:
    def verdict(kernel: str, problem: str = "") -> OpResult:
        if not problem:
            return OpResult(op.name, op.targets, op.entry, op.origin, kernel, True)
        known = known_reason(TARGET, op.facts)
        return OpResult(
            op.name,
            op.targets,
            op.entry,
            op.origin,
            kernel,
            False,
            f"{problem}: {known}" if known else problem,
        )

    left = [name for name in op.nodes if name in outside]
    if left:
        said = "; ".join(dict.fromkeys(reasons[n] for n in left if n in reasons))
        problem = f"{', '.join(left)} stayed outside the delegate (portable float kernel)"
        return verdict("portable", f"{problem}{f' (partitioner: {said})' if said else ''}")
    for index, program, feeds, found in inside:
        nodes = [node for name in op.nodes for node in found.get(name, ())]
        if not nodes:
            continue
        problem = _float_edge(program, feeds, nodes, op, reasons)
        return verdict(f"xnnpack delegate {index}", problem)
    return verdict("removed")  # the lowering dropped it (a no-op): nothing to run


def _float_edge(program, feeds, nodes, op, reasons) -> str:
    """Why the op's nodes in a delegate do not form an int8 group, or ""."""
    group = set(nodes)
    params = _parameters(program)
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg in group or arg.op == "placeholder" and arg.name in params:
                continue
            if not is_dequantize(arg):
                return f"{node.name} reads float {arg.name}: it runs in float in the delegate"
            source = arg.args[0]
            if isinstance(source, torch.fx.Node) and source.op == "placeholder":
                if source.name in params:
                    continue  # a quantized constant (weight, bias, scalar tensor)
                fed = feeds.get(source.name)
                if not is_quantize(fed):
                    continue  # int8 from another delegate's output
                said = _outside_quantize(fed, reasons)
                return (
                    f"{node.name}'s input is quantized outside the delegate"
                    f"{f' ({said})' if said else ''}"
                )
    if op.quantized_output and not any(is_quantize(u) for n in nodes for u in n.users):
        return "its output leaves the delegate in float before it is quantized"
    return ""


def _outside_quantize(node: Any, reasons: dict[str, str]) -> str:
    """A quantize op left outside, with its dtype and the partitioner's reason."""
    said = next((reasons[n] for n in [*source_names(node), node.name] if n in reasons), "")
    dtype = next(
        (str(a).removeprefix("torch.") for a in node.args if isinstance(a, torch.dtype)), ""
    )
    text = f"{_short(node.target)} {dtype}".strip()
    return f"{text}, partitioner: {said}" if said else text


def _parameters(program: Any) -> set[str]:
    signature = program.graph_signature
    user = set(signature.user_inputs)
    return {
        node.name
        for node in program.graph.nodes
        if node.op == "placeholder" and node.name not in user
    }


def _short(target: Any) -> str:
    """``quantized_decomposed.quantize_per_tensor.default`` for any dialect's op."""
    text = str(target)
    return str(getattr(target, "__name__", text)) if text.startswith("<") else text


@contextlib.contextmanager
def _why_not_partitioned() -> Iterator[dict[str, str]]:
    """Collect the partitioner's ``WhyNoPartition`` records (debug level) by source node name,
    without letting them reach any other handler."""
    reasons: dict[str, str] = {}

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            why = record.msg
            node, reason = getattr(why, "node", None), getattr(why, "reason", None)
            if node is None or not reason:
                return
            for name in [*source_names(node), node.name]:
                reasons.setdefault(name, str(reason))

    logger = logging.getLogger("executorch.backends.xnnpack")
    handler, level, propagate = Collect(logging.DEBUG), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield reasons
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
