"""``bespec diff A B --behaviour``: do two specs quantize alike, whatever their spelling?

Two specs can say the same thing in different words (entry order, names of dtype configs, one
``aten`` chain for three spellings, a ``remove`` instead of a missing entry): a text diff
shows hundreds of changed lines where nothing changes. This module runs both instead, and
compares what they do:

- **pt2e**: each spec's quantizer prepares the probe suite ``bespec export`` verifies with
  (every ATen op of the packaged table in each spelling and context, the fusions, and the
  verification models; :mod:`backend_spec.export.quantizer`), cached on disk per torch. The
  models are calibrated and converted, the probes compared as prepared; q/dq placement,
  qparams (observers) and outputs are compared per branch and ATen op
  (:mod:`.quantizer.verify`);
- **FX**: each spec's BackendConfig and ``qconfig_mapping`` quantize the reference nets
  (:data:`backend_spec.pt2e.parity_nets.PARITY_NETS` and the check zoo) with ``prepare_fx``,
  the same calibration, and ``convert_to_reference_fx``; per node, which inputs are
  dequantized and whether the output is quantized (with which qparams), which module it
  became and how its weight is quantized, are compared.

The answer is per op: the ATen op (pt2e) or the node's target (FX) and one line per differing
node, saying what differs (``in0<-x[0.02,7] vs float``: placement and qparams; a module
class; ``outputs differ``).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendConfig, quiet, torch

#: A model factory: () -> (model.eval(), example inputs).
ModelFactory = Callable[[], tuple[Any, tuple]]


#: The flows a comparison may run.
FLOWS = ("fx", "pt2e")


@dataclass
class Behaviour:
    """Two specs compared: the flows run, what each ran on, and the ops that differ."""

    flows: tuple[str, ...] = FLOWS
    #: Branches of the pt2e probe suite (models and probes) and FX models compared.
    pt2e_models: int = 0
    pt2e_probes: int = 0
    fx_models: int = 0
    #: ``(flow, op)`` -> one line per differing node (``model: node: A vs B``).
    differences: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return not self.differences

    def add(self, flow: str, op: str, line: str) -> None:
        self.differences.setdefault((flow, op), []).append(line)


def flows_in_play(first: BackendConfig, second: BackendConfig) -> tuple[str, ...]:
    """The flows two specs are written for: pt2e when both set pt2e keys (ports of a pt2e
    Quantizer, whose FX reading nobody verified), FX when neither does, both otherwise."""
    from backend_spec.ir.lower import backend_of

    pt2e = [backend_of(bc).uses_pt2e for bc in (first, second)]
    return ("pt2e",) if all(pt2e) else ("fx",) if not any(pt2e) else FLOWS


def compare_behaviour(
    first: BackendConfig,
    second: BackendConfig,
    flows: tuple[str, ...] = FLOWS,
    *,
    fx_models: dict[str, ModelFactory] | None = None,
) -> Behaviour:
    """Run both configs through ``flows`` (see the module docstring) and compare.

    ``fx_models`` replaces the FX reference nets (tests use a few)."""
    found = Behaviour(flows=tuple(flow for flow in FLOWS if flow in flows))
    if "pt2e" in flows:
        _compare_pt2e(first, second, found)
    if "fx" in flows:
        models = reference_nets() if fx_models is None else fx_models
        for label, factory in models.items():
            _compare_fx(label, factory, first, second, found)
            found.fx_models += 1
    return found


# --- pt2e ----------------------------------------------------------------------------------


def _compare_pt2e(first: BackendConfig, second: BackendConfig, found: Behaviour) -> None:
    import backend_spec
    from backend_spec.export.quantizer import probe_suite
    from backend_spec.export.quantizer.verify import compare_runs, run

    suite, branches, _unit_names, inputs = probe_suite()
    models = {index for index, branch in enumerate(branches) if branch.unit is None}
    found.pt2e_models, found.pt2e_probes = len(models), len(branches) - len(models)
    runs = [run(suite, backend_spec.quantizer(bc), inputs, models) for bc in (first, second)]
    if runs[0].error or runs[1].error:
        if runs[0].error != runs[1].error:
            found.add("pt2e", "(suite)", f"A: {runs[0].error or 'ok'}; B: {runs[1].error or 'ok'}")
        return
    labels = [branch.label for branch in branches]
    for result in compare_runs(suite, labels, *runs):
        for op, lines in result.differences.items():
            for line in lines:
                found.add("pt2e", op, f"{result.label}: {line}")
        if not result.outputs_equal and not result.differences:
            found.add("pt2e", "(outputs)", f"{result.label}: outputs differ")


# --- FX ------------------------------------------------------------------------------------


def reference_nets() -> dict[str, ModelFactory]:
    """The FX models: the pt2e parity nets and the check zoo (zoo names prefixed ``zoo:``)."""
    from backend_spec.check.zoo import MODELS
    from backend_spec.pt2e.parity_nets import PARITY_NETS

    return {**PARITY_NETS, **{f"zoo:{name}": factory for name, factory in MODELS.items()}}


@dataclass
class _FxRun:
    placement: dict[str, list[tuple]]
    targets: dict[str, str]
    output: Any = None
    error: str = ""


def _compare_fx(
    label: str,
    factory: ModelFactory,
    first: BackendConfig,
    second: BackendConfig,
    found: Behaviour,
) -> None:
    from backend_spec.export.quantizer.verify import equal_outputs
    from backend_spec.pt2e.compare import node_differences

    model, example_inputs = factory()
    a, b = (_run_fx(bc, model, example_inputs) for bc in (first, second))
    if a.error or b.error:
        if a.error != b.error:
            found.add("fx", "(model)", f"{label}: A: {a.error or 'ok'}; B: {b.error or 'ok'}")
        return
    lines = node_differences(a.placement, b.placement, _fx_part)
    for line in lines:
        node = line.split(":", 1)[0]
        found.add("fx", a.targets.get(node) or b.targets.get(node, node), f"{label}: {line}")
    if not lines and not equal_outputs(a.output, b.output):
        found.add("fx", "(outputs)", f"{label}: outputs differ")


def _run_fx(backend_config: BackendConfig, model: Any, example_inputs: tuple) -> _FxRun:
    from backend_spec.analysis.qconfigs import qconfig_mapping
    from backend_spec.pt2e.flows import calibration

    with quiet():
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
    try:
        with quiet(), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prepared = prepare_fx(
                copy.deepcopy(model),
                qconfig_mapping(backend_config),
                example_inputs,
                backend_config=backend_config,
            )
            for batch in calibration(example_inputs):
                prepared(*batch)
            converted = convert_to_reference_fx(prepared, backend_config=backend_config)
            output = converted(*example_inputs)
    except Exception as exc:  # noqa: BLE001 - a spec that makes FX fail is a finding
        return _FxRun({}, {}, None, f"{type(exc).__name__}: {str(exc)[:200]}")
    placement, targets = fx_placement(converted, dict(model.named_modules()))
    return _FxRun(placement, targets, output)


def fx_placement(
    model: Any, float_modules: dict[str, Any] | None = None
) -> tuple[dict[str, list[tuple]], dict[str, str]]:
    """Per op node of a reference FX model: its dequantized inputs (source and qparams), its
    quantized output, and for a module its class and weight quantization; and each node's
    target as a name (``nn.Conv2d``, ``operator.add``, ``method:view``). A module node is
    named by the class ``float_modules`` (the float model's) has at its path, the op the spec's
    entry matched, rather than the reference module it became."""
    from backend_spec.check.signature import class_name, function_name

    modules = dict(model.named_modules())
    float_modules = float_modules or {}
    placement: dict[str, list[tuple]] = {}
    targets: dict[str, str] = {}
    for node in model.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method") or _is_qdq(node):
            continue
        entries: list[tuple] = []
        if node.op == "call_module":
            module = modules[node.target]
            targets[node.name] = class_name(type(float_modules.get(node.target, module)))
            entries.append(("module", class_name(type(module)), *_weight(module)))
        elif node.op == "call_method":
            targets[node.name] = f"method:{node.target}"
        else:
            targets[node.name] = function_name(node.target)
        for index, arg in enumerate(node.all_input_nodes):
            if _is_dequantize(arg) and _is_quantize(arg.args[0]):
                quantize = arg.args[0]
                entries.append(("in", index, _source(quantize), _qparams(model, quantize)))
        for user in node.users:
            if _is_quantize(user):
                entries.append(("out", _qparams(model, user)))
                break
        placement[node.name] = entries
    return placement, targets


def _is_quantize(node: Any) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and "quantize_per" in str(node.target)
    )


def _is_dequantize(node: Any) -> bool:
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_method":
        return node.target == "dequantize"
    return node.op == "call_function" and node.target is torch.dequantize


def _is_qdq(node: Any) -> bool:
    return _is_quantize(node) or _is_dequantize(node)


def _source(quantize: Any) -> str:
    source = quantize.args[0]
    while _is_qdq(source):
        source = source.args[0]
    return getattr(source, "name", str(source))


def _qparams(model: Any, node: Any) -> tuple:
    """As pt2e's placement reads them; FX keeps a per-tensor scale as a one-element tensor."""
    from backend_spec.pt2e.compare import node_qparams

    values = [
        v[0] if isinstance(v, tuple) and len(v) == 1 else v for v in node_qparams(model, node)
    ]
    if len(values) > 1 and isinstance(values[1], float) and values[1].is_integer():
        values[1] = int(values[1])  # a zero point, read off a float tensor
    return tuple(values)


def _weight(module: Any) -> tuple:
    """A reference module's weight quantization (dtype, qscheme, scales rounded)."""
    qscheme = getattr(module, "weight_qscheme", None)
    if qscheme is None:
        return ()
    scale = getattr(module, "weight_scale", None)
    scales = (
        tuple(round(float(v), 9) for v in scale.flatten().tolist())
        if isinstance(scale, torch.Tensor)
        else ()
    )
    return (str(getattr(module, "weight_dtype", "")), str(qscheme), scales)


def _fx_part(entry: tuple) -> str:
    from backend_spec.pt2e.compare import placement_part

    if entry[0] != "module":
        return placement_part(entry)
    if len(entry) == 2:
        return entry[1]
    dtype, qscheme = (str(v).removeprefix("torch.") for v in entry[2:4])
    scales = entry[4]
    shown = f"x{len(scales)}" if len(scales) > 1 else ",".join(f"{v:.4g}" for v in scales)
    return f"{entry[1]}(weight {dtype} {qscheme} [{shown}])"
