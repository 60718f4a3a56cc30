"""Compare two pt2e Quantizers on the same models: q/dq placement, qparams and outputs.

Porting a hand-written Quantizer (``XNNPACKQuantizer``, ``X86InductorQuantizer``) to a spec is
done when the spec's quantizer and the original quantize every model the same way. Each model is
exported once; each quantizer prepares its own copy of that graph, sees the same calibration
batches and is converted with ``convert_pt2e``. Both converted graphs keep the exported node
names, so placement is compared op by op: which inputs of each operator node are dequantized
(with which qparams) and whether its output is quantized (with which qparams).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import quiet, torch
from backend_spec.pt2e.flows import calibration

#: A model factory: () -> (model, example inputs).
ModelFactory = Callable[[], tuple[torch.nn.Module, tuple]]

#: Per operator node: ("in", argument index, producer name or "", qparams) and ("out", qparams).
Placement = dict[str, list[tuple]]


@dataclass
class ModelComparison:
    """Two quantizers on one model."""

    name: str
    placement: tuple[Placement, Placement]
    outputs: tuple[list[torch.Tensor], list[torch.Tensor]]
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """Same placement, same qparams and bit-identical outputs."""
        return not self.differences


def compare_quantizers(
    first: Any | Callable[[], Any],
    second: Any | Callable[[], Any],
    models: Iterable[tuple[str, ModelFactory]],
) -> list[ModelComparison]:
    """Quantize each named model with both quantizers and list what differs.

    A quantizer may be given as a factory (a fresh instance per model, as quantizers that record
    state need); ``first``/``second`` are used as they are when they are Quantizer instances.
    """
    results = []
    for name, factory in models:
        model, example_inputs = factory()
        batches = calibration(example_inputs)
        with quiet(), warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            exported = torch.export.export(model, example_inputs).module()
        runs = [
            _quantize(_fresh(quantizer), copy.deepcopy(exported), example_inputs, batches)
            for quantizer in (first, second)
        ]
        (place_a, out_a), (place_b, out_b) = runs
        result = ModelComparison(name, (place_a, place_b), (out_a, out_b))
        result.differences = placement_differences(place_a, place_b)
        for index, (a, b) in enumerate(zip(out_a, out_b, strict=True)):
            if not torch.equal(a, b):
                diff = float((a.float() - b.float()).abs().max())
                result.differences.append(f"output {index} differs (max abs difference {diff:.3g})")
        results.append(result)
    return results


def _fresh(quantizer: Any) -> Any:
    from torchao.quantization.pt2e.quantizer import Quantizer

    return quantizer if isinstance(quantizer, Quantizer) else quantizer()


def _quantize(
    quantizer: Any, exported: Any, example_inputs: tuple, batches: list[tuple]
) -> tuple[Placement, list[torch.Tensor]]:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from backend_spec.pt2e.reuse import reused_patterns

    with quiet(), warnings.catch_warnings(), torch.no_grad(), reused_patterns():
        warnings.simplefilter("ignore")
        prepared = prepare_pt2e(exported, quantizer)
        for batch in batches:
            prepared(*batch)
        converted = convert_pt2e(prepared, fold_quantize=False)
        output = _tensors(converted(*example_inputs))
    return placement(converted), output


def _tensors(output: Any) -> list[torch.Tensor]:
    """Every tensor of a model output (nested tuples and lists flattened)."""
    if isinstance(output, (tuple, list)):
        return [tensor for item in output for tensor in _tensors(item)]
    return [output.detach()] if isinstance(output, torch.Tensor) else []


def _is_qdq(node: Any, kind: str) -> bool:
    """Whether ``node`` is a ``quantized_decomposed`` quantize (``kind="quantize"``) or
    dequantize (``kind="dequantize"``) call."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    namespace, _, rest = str(node.target).partition(".")
    return namespace == "quantized_decomposed" and rest.startswith(kind)


def placement(model: Any) -> Placement:
    """Per operator node of a converted model: its dequantized inputs and quantized output."""
    found: Placement = {}
    for node in model.graph.nodes:
        if node.op != "call_function" or _is_qdq(node, "quantize") or _is_qdq(node, "dequantize"):
            continue
        entries: list[tuple] = []
        for index, arg in enumerate(node.all_input_nodes):
            if _is_qdq(arg, "dequantize"):
                source = _dq_source(arg)
                entries.append(("in", index, source.name, node_qparams(model, arg)))
        for user in node.users:
            if _is_qdq(user, "quantize"):
                entries.append(("out", node_qparams(model, user)))
                break
        found[node.name] = entries
    return found


def _dq_source(dq: Any) -> Any:
    """The float node a dequantize's quantize reads (the weight's get_attr for weights)."""
    node = dq
    while isinstance(node, torch.fx.Node) and (
        _is_qdq(node, "dequantize") or _is_qdq(node, "quantize")
    ):
        node = node.args[0]
    return node


def node_qparams(model: Any, node: Any) -> tuple:
    values = []
    for arg in node.args[1:]:
        value = _value(model, arg)
        if isinstance(value, torch.fx.Node):
            # Computed at run time (dynamic quantization's choose_qparams): two graphs agree
            # on that, not on node identities.
            value = "dynamic"
        elif isinstance(value, torch.Tensor):
            value = tuple(round(float(v), 9) for v in value.flatten().tolist())
        elif isinstance(value, float):
            value = round(value, 9)
        values.append(value if not isinstance(value, torch.dtype) else str(value))
    return tuple(values)


def _value(model: Any, arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
        value = model
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value
    return arg


def placement_differences(first: Placement, second: Placement) -> list[str]:
    """One line per operator node whose q/dq placement or qparams differ."""
    return node_differences(first, second, placement_part)


def node_differences(
    first: dict[str, list[tuple]],
    second: dict[str, list[tuple]],
    part: Callable[[tuple], str],
    note: str = "",
) -> list[str]:
    """One line per node whose entries differ, sorted: each side's entries written with
    ``part`` (``absent`` when the node is missing, ``float`` when it has none), then ``note``."""
    lines = []
    for name in first.keys() | second.keys():
        a, b = first.get(name), second.get(name)
        if a != b:
            lines.append(f"{name}: {_entries_text(a, part)} vs {_entries_text(b, part)}{note}")
    return sorted(lines)


def _entries_text(entries: list[tuple] | None, part: Callable[[tuple], str]) -> str:
    if entries is None:
        return "absent"
    if not entries:
        return "float"
    return " ".join(part(entry) for entry in entries)


def placement_part(entry: tuple) -> str:
    if entry[0] == "in":
        return f"in{entry[1]}<-{entry[2]}{_short(entry[3])}"
    return f"out{_short(entry[1])}"


def _short(qparams: tuple) -> str:
    if not qparams:
        return ""
    scale = qparams[0]
    if isinstance(scale, tuple):
        return f"[per-channel x{len(scale)}]"
    if not isinstance(scale, (int, float)):
        return f"[{scale}]"
    return f"[{scale:.4g},{qparams[1]}]"
