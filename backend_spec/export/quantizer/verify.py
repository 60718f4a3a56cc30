"""Quantize the same models with two Quantizers and say, per ATen op, where they differ.

Both quantizers see one exported graph (deep-copied), the same calibration batches, then
``convert_pt2e``. Compared are, for every operator node: which inputs come from a dequantize
and which users are quantizes (q/dq placement) with their qparams, and the model outputs
(``torch.equal``). Node names survive prepare/convert, so nodes are matched by name.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import quiet, torch

_QD_PREFIX = "quantized_decomposed."


@dataclass
class ModelResult:
    """One model under both quantizers."""

    name: str
    #: ATen op -> what differs at its nodes (empty when the quantizers agree).
    differences: dict[str, list[str]] = field(default_factory=dict)
    outputs_equal: bool = True
    error: str = ""

    @property
    def identical(self) -> bool:
        return not self.differences and self.outputs_equal and not self.error


def compare_models(
    original: Callable[[], Any],
    candidate: Callable[[], Any],
    models: Iterable[tuple[str, Any, tuple]],
) -> list[ModelResult]:
    """Quantize each ``(name, exported GraphModule or nn.Module, example inputs)`` with a fresh
    quantizer from each factory and compare."""
    return [compare_one(original, candidate, name, model, inputs) for name, model, inputs in models]


def compare_one(original: Callable[[], Any], candidate: Callable[[], Any], name: str,
                model: Any, example_inputs: tuple) -> ModelResult:
    from backend_spec.pt2e.flows import calibration

    result = ModelResult(name)
    exported = model if isinstance(model, torch.fx.GraphModule) else _export(model, example_inputs)
    batches = calibration(example_inputs)
    ran = []
    for role, factory in (("quantizer", original), ("spec", candidate)):
        try:
            ran.append(_quantize(exported, factory(), batches))
        except Exception as exc:  # noqa: BLE001 - a crash of either side is a difference
            result.error = f"{role}: {type(exc).__name__}: {str(exc)[:200]}"
            return result
    (placement_a, out_a), (placement_b, out_b) = ran
    result.outputs_equal = _outputs_equal(out_a, out_b)
    for node_name in sorted(set(placement_a) | set(placement_b)):
        a, b = placement_a.get(node_name), placement_b.get(node_name)
        if a == b:
            continue
        target = (a or b)["target"]
        result.differences.setdefault(target, []).append(_describe(node_name, a, b))
    return result


def _export(model: Any, example_inputs: tuple) -> Any:
    with quiet(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(copy.deepcopy(model).eval(), example_inputs).module()


def _quantize(exported: Any, quantizer: Any, batches: list[tuple]) -> tuple[dict, Any]:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with quiet(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_pt2e(copy.deepcopy(exported), quantizer)
        for batch in batches:
            prepared(*batch)
        converted = convert_pt2e(prepared)
        output = converted(*batches[0])
    return placement(converted), output


def placement(model: Any) -> dict[str, dict[str, Any]]:
    """Per operator node: target, qparams of its dequantized inputs and quantized output."""
    found: dict[str, dict[str, Any]] = {}
    for node in model.graph.nodes:
        if node.op != "call_function" or _is_qdq(node):
            continue
        inputs = {}
        for position, arg in _flat_args(node):
            if isinstance(arg, torch.fx.Node) and _is_qdq(arg) and "dequantize" in str(arg.target):
                inputs[position] = _qparams(model, arg)
        outputs = sorted(
            repr(_qparams(model, user))
            for user in node.users
            if _is_qdq(user) and "dequantize" not in str(user.target)
        )
        found[node.name] = {"target": str(node.target), "inputs": inputs, "outputs": outputs}
    return found


def _is_qdq(node: Any) -> bool:
    return str(node.target).startswith(_QD_PREFIX)


def _flat_args(node: Any) -> list[tuple[str, Any]]:
    flat = []
    for index, arg in enumerate(node.args):
        if isinstance(arg, (list, tuple)):
            flat += [(f"{index}.{inner}", item) for inner, item in enumerate(arg)]
        else:
            flat.append((str(index), arg))
    return flat


def _qparams(model: Any, node: Any) -> tuple:
    """The qparams a q/dq node uses (tensors as rounded lists), without its data input."""
    return tuple(_value(model, arg) for arg in node.args[1:])


def _value(model: Any, arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        if arg.op != "get_attr":
            return f"<{arg.op}>"
        value = model
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        arg = value
    if isinstance(arg, torch.Tensor):
        return tuple(round(float(v), 9) for v in arg.flatten().tolist()[:4096])
    if isinstance(arg, float):
        return round(arg, 9)
    return str(arg) if isinstance(arg, torch.dtype) else arg


def _outputs_equal(a: Any, b: Any) -> bool:
    flat_a, flat_b = _tensors(a), _tensors(b)
    return len(flat_a) == len(flat_b) and all(
        x.shape == y.shape and torch.equal(x, y) for x, y in zip(flat_a, flat_b, strict=True)
    )


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in _tensors(item)]
    return []


def _describe(name: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if a is None or b is None:
        return f"{name}: only in the {'spec' if a is None else 'quantizer'}'s graph"
    parts = []
    for position in sorted(set(a["inputs"]) | set(b["inputs"])):
        qa, qb = a["inputs"].get(position), b["inputs"].get(position)
        if qa != qb:
            parts.append(f"input {position} {_states(qa, qb)}")
    if a["outputs"] != b["outputs"]:
        parts.append(f"output {_states(a['outputs'] or None, b['outputs'] or None)}")
    return f"{name}: " + "; ".join(parts)


def _states(original: Any, spec: Any) -> str:
    if original is not None and spec is not None:
        return f"quantized with other qparams ({original} by the quantizer, {spec} by the spec)"
    if original is None:
        return "float by the quantizer, quantized by the spec"
    return "quantized by the quantizer, float by the spec"
