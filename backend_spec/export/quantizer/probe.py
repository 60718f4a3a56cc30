"""Probe a pt2e Quantizer: annotate small exported graphs and read what it wrote, as plain data.

A Quantizer is a function from graphs to annotations, so its behaviour can be observed rather
than read from its code. Every unit probed (one ATen op of the packaged table, or a chain such
as conv -> relu) becomes a *branch* of one "board" model, so that one ``torch.export`` covers
every unit; the board is exported once per *context*, which is what the units' annotations
may depend on:

- ``alone``: the unit reads the board's inputs and its result is a board output;
- ``pre``: each float input comes from an ``nn.Linear`` (a producer quantizers quantize);
- ``mixed``: only the first input comes from a Linear, the others are board inputs;
- ``post``: the result feeds an ``nn.Linear``;
- ``pre_post``: both.

The quantizer then runs exactly as ``prepare_pt2e`` runs it (conv/linear-bn folding,
``transform_for_annotation``, ``annotate``), and each branch's annotations are written down
as JSON-able dicts (:func:`describe_qspec`). Nothing here interprets them: that is
:mod:`.infer`'s job.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from typing import Any

from backend_spec._torch import BackendPatternConfig, quiet, torch

nn = torch.nn

CONTEXTS = ("alone", "pre", "mixed", "post", "pre_post")

#: Chains probed besides the packaged table's single ops: the fusions quantizers annotate as
#: one unit (spec op names, forward order). The table's own multi-op chains come from fused
#: module classes; these are written with plain modules so that export sees separate ops.
FUSION_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("nn.Conv1d", "nn.ReLU"),
    ("nn.Conv2d", "nn.ReLU"),
    ("nn.Conv3d", "nn.ReLU"),
    ("nn.Conv2d", "nn.BatchNorm2d"),
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.ReLU"),
    ("nn.Conv1d", "nn.BatchNorm1d", "nn.ReLU"),
    ("nn.Conv2d", "nn.ReLU6"),
    ("nn.Conv2d", "nn.Hardtanh"),
    ("nn.Conv2d", "nn.Hardswish"),
    ("nn.ConvTranspose2d", "nn.ReLU"),
    ("nn.ConvTranspose2d", "nn.BatchNorm2d"),
    ("nn.Linear", "nn.ReLU"),
    ("nn.Linear", "nn.ReLU6"),
    ("nn.Linear", "nn.BatchNorm1d"),
    ("nn.Linear", "nn.Tanh"),
    ("nn.Linear", "nn.LeakyReLU"),
    ("operator.add", "nn.ReLU"),
    ("operator.mul", "nn.ReLU"),
    ("nn.Conv2d", "operator.add"),
    ("nn.Conv2d", "operator.add", "nn.ReLU"),
    ("nn.BatchNorm2d", "nn.ReLU"),
)

#: Ops of the table that are not worth a branch: they vanish or only move memory in place.
_SKIPPED_OPS = ("aten.detach", "aten.resize_", "aten.dropout", "aten.embedding")


@dataclass(frozen=True)
class Unit:
    """One probed thing: spec op names (forward order) and its ATen chain key."""

    names: tuple[str, ...]
    key: str


@functools.cache
def units() -> tuple[Unit, ...]:
    """Every unit probed: one per single-op ATen chain of the packaged table, then the fusions.

    The representative name of a chain is the table's first, preferring module classes and
    ``F.`` functions (their one-op models exercise the op's usual arguments)."""
    from backend_spec.pt2e.aten import _cached_table

    by_key: dict[str, list[str]] = {}
    for name, described in _cached_table().items():
        chain = described.get("chain")
        if not chain or len(chain) != 1 or chain[0][0].startswith(_SKIPPED_OPS):
            continue
        by_key.setdefault(chain[0][0], []).append(name)
    found = [Unit((_preferred(names),), key) for key, names in sorted(by_key.items())]
    found += [Unit(names, ">".join(names)) for names in FUSION_CANDIDATES]
    return tuple(found)


def _preferred(names: list[str]) -> str:
    for prefix in ("nn.", "F.", "torch.", "operator.", "method:"):
        for name in sorted(names):
            if name.startswith(prefix) and not name.startswith("nni."):
                return name
    return sorted(names)[0]


class Board(nn.Module):
    """Every unit's one-op model side by side; inputs are flattened in unit order."""

    def __init__(self, boards: Boards, context: str) -> None:
        super().__init__()
        self.b = nn.ModuleList(copy.deepcopy(boards.models))
        self.arity = boards.arity
        produced = {"pre": None, "pre_post": None, "mixed": 1}
        pre, post = [], []
        for widths, out in zip(boards.widths, boards.out_widths, strict=True):
            count = len(widths) if context in produced else 0
            count = produced.get(context) or count
            pre.append(nn.ModuleList(_linear(w) for w in widths[:count]))
            post.append(_linear(out) if context in ("post", "pre_post") else nn.Identity())
        self.pre, self.post = nn.ModuleList(pre), nn.ModuleList(post)

    def forward(self, *flat: Any) -> tuple:
        outputs, start = [], 0
        for index, model in enumerate(self.b):
            inputs = list(flat[start:start + self.arity[index]])
            start += self.arity[index]
            for slot, producer in enumerate(self.pre[index]):
                inputs[slot] = producer(inputs[slot])
            outputs.append(self.post[index](model(*inputs)))
        return tuple(outputs)


def _linear(width: int) -> nn.Module:
    """A quantizable producer / consumer of a tensor whose last dimension is ``width``."""
    return nn.Linear(width, width) if width > 0 else nn.Identity()


@dataclass
class Boards:
    """The units that could be built, and the board's inputs (shared by every context)."""

    units: list[Unit]
    models: list[nn.Module]
    inputs: tuple
    arity: list[int]
    widths: list[list[int]]
    #: The output width of each unit, for the post context (0: not a float tensor).
    out_widths: list[int]


def build_units() -> Boards:
    """Synthesize each unit's model; units that cannot be built are left out."""
    from backend_spec.check.synthesize import SkipPattern, synthesize
    from backend_spec.names.naming import resolve_name

    made_units, models, inputs, arity, widths, outs = [], [], [], [], [], []
    for unit in units():
        try:
            ops = tuple(resolve_name(name) for name in unit.names)
            with quiet():
                made = synthesize(BackendPatternConfig(ops[0] if len(ops) == 1 else ops))
                output = made.model(*made.example_inputs)
        except (SkipPattern, Exception):  # noqa: BLE001 - a unit that cannot be built is skipped
            continue
        if not isinstance(output, torch.Tensor) or not output.is_floating_point():
            continue
        made_units.append(unit)
        models.append(made.model)
        inputs.extend(made.example_inputs)
        arity.append(len(made.example_inputs))
        widths.append([_width(t) for t in made.example_inputs])
        outs.append(_width(output))
    return Boards(made_units, models, tuple(inputs), arity, widths, outs)


def _width(tensor: Any) -> int:
    if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.dim() > 0:
        return int(tensor.shape[-1])
    return 0


def board_module(boards: Boards, context: str) -> Board:
    torch.manual_seed(0)
    return Board(boards, context).eval()


def export_board(boards: Boards, context: str) -> Any:
    """The exported board of ``context`` (a GraphModule, before any quantizer ran)."""
    with quiet(), torch.no_grad():
        return torch.export.export(board_module(boards, context), boards.inputs).module()


def annotate_like_prepare(graph_module: Any, quantizer: Any) -> Any:
    """Run the quantizer on ``graph_module`` the way ``prepare_pt2e`` does, up to annotation."""
    from torchao.quantization.pt2e.utils import _fuse_conv_bn_, _fuse_linear_bn_

    with quiet():
        _fuse_conv_bn_(graph_module)
        _fuse_linear_bn_(graph_module)
        graph_module = quantizer.transform_for_annotation(graph_module)
        quantizer.annotate(graph_module)
    return graph_module


_PATH = re.compile(r"^(b|pre|post)\.(\d+)")


def branch_of(node: Any) -> tuple[str, int] | None:
    """(part, unit index) of a node of a board: ``("b", 3)`` for unit 3's own ops."""
    stack = node.meta.get("nn_module_stack") or {}
    for path, _cls in stack.values():
        match = _PATH.match(str(path).replace("[", ".").replace("]", "").replace("L['self'].", ""))
        if match:
            return match.group(1), int(match.group(2))
    return None


def read_board(graph_module: Any, count: int) -> list[dict[str, Any]]:
    """Per unit: its op nodes' annotations, and those of its producers / consumer linears."""
    found: list[dict[str, Any]] = [{"ops": [], "pre": [], "post": []} for _ in range(count)]
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        where = branch_of(node)
        if where is None:
            continue
        part, index = where
        entry = {"target": str(node.target), **describe_node(node)}
        found[index]["ops" if part == "b" else part].append(entry)
    return found


def describe_node(node: Any) -> dict[str, Any]:
    """A node's annotation as data: each input (by argument position) and the output."""
    annotation = node.meta.get("quantization_annotation")
    positions = _arg_positions(node)
    inputs: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for position, arg in positions.items():
        kinds[position] = "param" if arg.op == "get_attr" else "act"
    if annotation is None:
        return {"annotated": False, "inputs": {}, "kinds": kinds, "output": None}
    for arg, qspec in annotation.input_qspec_map.items():
        position = next((p for p, a in positions.items() if a is arg), "?")
        inputs[position] = describe_qspec(qspec, node, positions)
    return {
        "annotated": bool(getattr(annotation, "_annotated", False)),
        "inputs": inputs,
        "kinds": kinds,
        "output": describe_qspec(annotation.output_qspec, node, positions),
    }


def _arg_positions(node: Any) -> dict[str, Any]:
    """``"0"``, ``"1"``... for node arguments; ``"0.1"`` for the second tensor of a list."""
    positions: dict[str, Any] = {}
    for index, arg in enumerate(node.args):
        if isinstance(arg, torch.fx.Node):
            positions[str(index)] = arg
        elif isinstance(arg, (list, tuple)):
            for inner, item in enumerate(arg):
                if isinstance(item, torch.fx.Node):
                    positions[f"{index}.{inner}"] = item
    return positions


def describe_qspec(qspec: Any, node: Any, positions: dict[str, Any]) -> dict[str, Any] | None:
    """A torchao qspec as JSON-able data (``None``: not quantized)."""
    if qspec is None:
        return None
    kind = type(qspec).__name__
    if kind == "SharedQuantizationSpec":
        return {"kind": "shared", "with": _reference(qspec.edge_or_node, node, positions)}
    data: dict[str, Any] = {
        "dtype": str(qspec.dtype).removeprefix("torch."),
        "quant_min": qspec.quant_min,
        "quant_max": qspec.quant_max,
        "qscheme": None if qspec.qscheme is None else str(qspec.qscheme).removeprefix("torch."),
    }
    if kind == "FixedQParamsQuantizationSpec":
        return {"kind": "fixed", **data, "scale": float(qspec.scale),
                "zero_point": int(qspec.zero_point)}
    if kind == "DerivedQuantizationSpec":
        return {
            "kind": "derived",
            **data,
            "ch_axis": qspec.ch_axis,
            "from": [_reference(ref, node, positions) for ref in qspec.derived_from],
            "fn": getattr(qspec.derive_qparams_fn, "__qualname__", repr(qspec.derive_qparams_fn)),
        }
    observer, kwargs = _constructor(qspec.observer_or_fake_quant_ctr)
    return {
        "kind": "observed",
        **data,
        "ch_axis": qspec.ch_axis,
        "is_dynamic": bool(qspec.is_dynamic),
        "observer": observer,
        "kwargs": kwargs,
    }


def _constructor(ctr: Any) -> tuple[str, dict[str, Any]]:
    """(class name, keyword arguments) of an observer / fake-quant constructor."""
    kwargs: dict[str, Any] = {}
    while isinstance(ctr, functools.partial) or hasattr(ctr, "p"):
        partial = ctr if isinstance(ctr, functools.partial) else ctr.p
        kwargs = {**partial.keywords, **kwargs}
        ctr = partial.func
    plain = {key: _plain(value) for key, value in sorted(kwargs.items())}
    return getattr(ctr, "__name__", type(ctr).__name__), plain


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (torch.dtype, torch.qscheme)):
        return str(value).removeprefix("torch.")
    if isinstance(value, type) or callable(value):
        name, kwargs = _constructor(value)
        return {"class": name, "kwargs": kwargs}
    return repr(value)


def _reference(ref: Any, node: Any, positions: dict[str, Any]) -> str:
    """Where a shared/derived qspec points, relative to ``node``: ``input:0``, ``output``,
    ``producer:0`` (the output of the node at input 0) or ``other`` (elsewhere in the graph)."""
    if isinstance(ref, tuple):
        source, target = ref
        if target is node:
            position = next((p for p, a in positions.items() if a is source), None)
            return f"input:{position}" if position is not None else "other"
        return "other"
    if ref is node:
        return "output"
    position = next((p for p, a in positions.items() if a is ref), None)
    return f"producer:{position}" if position is not None else "other"


def probe(quantizer_factory: Any, boards: Boards, exported: dict[str, Any]) -> dict[str, Any]:
    """Per context, per unit (by key): what a fresh quantizer annotated."""
    result: dict[str, Any] = {}
    for context, graph_module in exported.items():
        annotated = annotate_like_prepare(copy.deepcopy(graph_module), quantizer_factory())
        read = read_board(annotated, len(boards.units))
        result[context] = {unit.key: read[i] for i, unit in enumerate(boards.units)}
    return result
