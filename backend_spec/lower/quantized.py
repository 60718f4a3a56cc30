"""A model quantized by the spec's pt2e quantizer, with the ops it quantized named.

Lowering is judged per *quantized op*: each run of nodes one rule of the spec matched (a
:class:`~backend_spec.pt2e.runtime.Match`) whose converted graph actually carries quantized
tensors (a dequantize feeds it or a quantize reads it; a matched pooling after a float producer
is not quantized). Each keeps the spec entry that made it (its label and ``file:line``), so a
failure names the line to edit. Node names are those of the graph the quantizer annotated;
ExecuTorch and inductor keep them in ``node.meta["from_node"]``, which is how a lowered node is
traced back (:func:`source_names`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backend_spec._torch import BackendConfig, torch
from backend_spec.lower.constraints import Facts


@dataclass(frozen=True)
class QuantizedOp:
    """One quantized op: the nodes of its match (forward order) and the entry that made it."""

    nodes: tuple[str, ...]
    targets: tuple[str, ...]
    entry: str
    origin: str
    #: Whether the converted graph quantizes the op's output (a quantize reads its last node).
    quantized_output: bool
    facts: Facts
    #: The converted graph's quantize that reads the op's output (lowered kernels that fold
    #: it in are named after it), if any.
    output_quantize: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """Every converted-graph name a lowered node of this op may be traced back to."""
        return self.nodes + ((self.output_quantize,) if self.output_quantize else ())

    @property
    def name(self) -> str:
        return "+".join(self.nodes)


@dataclass
class Quantized:
    """A converted pt2e model, its float original, inputs, output and quantized ops."""

    float_model: Any
    converted: Any
    inputs: tuple
    output: torch.Tensor
    ops: list[QuantizedOp]

    @property
    def node_names(self) -> set[str]:
        """The operator nodes of the converted graph (those the annotated graph had too)."""
        return {n.name for n in self.converted.graph.nodes if n.op == "call_function"}


def entry_origins(backend_config: BackendConfig) -> dict[str, str]:
    """Each pt2e rule label (an entry's ops) -> where the entry is written (``file:line``, the
    first entry of that label: the one whose rule the table keeps)."""
    from backend_spec.ir.lower import backend_of
    from backend_spec.pt2e.rules import entry_labels

    origins: dict[str, str] = {}
    for entry, label in entry_labels(backend_of(backend_config)):
        where = entry.origin.source + (f":{entry.origin.line}" if entry.origin.line else "")
        origins.setdefault(label, where)
    return origins


def quantize(template: Any, origins: dict[str, str], model: Any, inputs: tuple) -> Quantized:
    """Quantize ``model`` with a fresh copy of the spec's quantizer ``template`` (calibrated as
    ``check --flow pt2e`` does) and name its quantized ops."""
    from backend_spec.pt2e import flows
    from backend_spec.pt2e.runtime import TableQuantizer

    made = TableQuantizer(template.table)
    model = model.eval()
    result = flows.run_pt2e(made, copy.deepcopy(model), inputs, flows.calibration(inputs))
    return Quantized(model, result.model, inputs, result.output, _ops(made, result.model, origins))


def quantize_with(quantizer: Any, model: Any, inputs: tuple) -> Quantized:
    """Quantize ``model`` with any pt2e Quantizer (a hand-written one, for comparison): its
    quantized ops are not named (only the spec's rules give entries to name)."""
    from backend_spec.pt2e import flows

    model = model.eval()
    result = flows.run_pt2e(quantizer, copy.deepcopy(model), inputs, flows.calibration(inputs))
    return Quantized(model, result.model, inputs, result.output, [])


def _ops(made: Any, converted: Any, origins: dict[str, str]) -> list[QuantizedOp]:
    nodes = {node.name: node for node in converted.graph.nodes}
    found = []
    for match in made.matches:
        names = [node.name for node in match.nodes]
        present = [nodes[name] for name in names if name in nodes]
        if not present or not any(_reads_quantized(node) for node in present):
            continue
        found.append(
            QuantizedOp(
                nodes=tuple(names),
                targets=tuple(str(node.target) for node in match.nodes),
                entry=match.rule.label,
                origin=origins.get(match.rule.label, ""),
                quantized_output=any(is_quantize(user) for user in present[-1].users),
                facts=_facts(converted, present),
                output_quantize=next(
                    (user.name for user in present[-1].users if is_quantize(user)), ""
                ),
            )
        )
    return found


def _facts(converted: Any, nodes: list[torch.fx.Node]) -> Facts:
    """The op's activation dtype and weight granularity, as its dequantize inputs say."""
    inside = set(nodes)
    activation = weight = symmetric = full_range = None
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg in inside or not is_dequantize(arg):
                continue
            if _is_constant(arg.args[0]):
                weight = "per_channel" if "per_channel" in _target(arg) else "per_tensor"
                symmetric = _zero_points_zero(converted, arg.args[2])
            elif activation is None:
                activation = qdq_dtype(arg)
                full_range = _full_range(arg)
    targets = tuple(str(n.target) for n in nodes)
    return Facts(targets, activation, weight, symmetric, full_range)


def _full_range(dequantize: torch.fx.Node) -> bool | None:
    """Whether a per-tensor dequantize's [quant_min, quant_max] spans 256 values."""
    bounds = [a for a in dequantize.args[3:5] if isinstance(a, int)]
    return bounds[1] - bounds[0] >= 255 if len(bounds) == 2 else None


def _is_constant(arg: Any) -> bool:
    return isinstance(arg, torch.fx.Node) and arg.op == "get_attr"


def _zero_points_zero(converted: Any, arg: Any) -> bool | None:
    if isinstance(arg, int):
        return arg == 0
    if _is_constant(arg):
        value: Any = converted
        for part in str(arg.target).split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor):
            return bool((value == 0).all())
    return None


def _reads_quantized(node: torch.fx.Node) -> bool:
    """Whether a dequantize feeds ``node`` (any argument) or a quantize reads its output."""
    args = [a for a in node.all_input_nodes]
    return any(is_dequantize(a) for a in args) or any(is_quantize(u) for u in node.users)


def _target(node: Any) -> str:
    return str(getattr(node, "target", "")) if getattr(node, "op", "") == "call_function" else ""


def is_quantize(node: Any) -> bool:
    """A quantize op of any dialect (ATen, edge, ``quantized_decomposed``, torchao)."""
    target = _target(node)
    return "quantize_per" in target and "dequantize" not in target


def is_dequantize(node: Any) -> bool:
    return "dequantize_per" in _target(node)


def qdq_dtype(node: torch.fx.Node) -> str | None:
    """The integer dtype a quantize/dequantize node works in (its last dtype argument)."""
    for arg in [*node.args, *node.kwargs.values()][::-1]:
        if isinstance(arg, torch.dtype):
            return str(arg).removeprefix("torch.")
    return None


def source_names(node: torch.fx.Node) -> list[str]:
    """The names ``node`` had in the graphs it came from, oldest last (``from_node``)."""
    names = []
    chain = node.meta.get("from_node") or []
    while chain:
        names.append(chain[0].name)
        chain = chain[0].from_node
    return names


def trace_back(nodes: Iterable[torch.fx.Node], wanted: set[str]) -> dict[str, list[torch.fx.Node]]:
    """Each wanted (annotated) node name -> the ``nodes`` that came from it: the oldest name
    of a node's provenance is the annotated graph's (the export quantize ran on)."""
    found: dict[str, list[torch.fx.Node]] = {}
    for node in nodes:
        if node.op != "call_function":
            continue
        names = source_names(node)
        origin = names[-1] if names else node.name
        if origin in wanted:
            found.setdefault(origin, []).append(node)
    return found
