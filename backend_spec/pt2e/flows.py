"""Quantize one model with both flows under one spec and compare them.

FX: ``check``'s own pipeline (``prepare_fx`` with ``backend_spec.qconfig_mapping``,
``convert_to_reference_fx``, and ``convert_fx`` on an engine), so its verdict is the same.
pt2e: ``torch.export`` + ``prepare_pt2e`` with the spec's quantizer + ``convert_pt2e``. Both see
the same calibration batches. A difference is either explained by one of the documented
classes (:data:`DIFFERENCE_CLASSES`: things the two flows inherently do differently) or it is a
bug in the translation, which ``bespec check --flow both`` and the tests report.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.check.results import ModelResult
from backend_spec.check.run import calibration, quantize_fx
from backend_spec.pt2e.table import Policy

nn = torch.nn

#: SQNR (dB) between the flows' outputs that counts as equivalent for a documented difference.
EQUIVALENT_DB = 40.0

#: The documented ways the flows may legitimately differ, with the reason.
DIFFERENCE_CLASSES: dict[str, str] = {
    "bn_folding": "pt2e always folds BatchNorm into the conv/linear before it (PTQ); FX only "
    "when a fusion pattern of the spec matches",
    "weight_only_embedding": "pt2e's quantize_per_channel with float qparams adds the zero "
    "point after rounding, FX's before: weight-only embeddings differ",
    "recurrent": "aten.lstm takes its weights as one Tensor[] argument and pt2e has no "
    "dynamic RNN: recurrent modules stay float in pt2e",
    "dynamic": "dynamic quantization computes qparams at run time with different ops "
    "(quantize_per_tensor_dynamic vs choose_qparams + quantize)",
    "rounding_ties": "the quantize kernels round differently near .5 ties (FX's "
    "torch.quantize_per_tensor adds the zero point before rounding, quantized_decomposed "
    "after; averaging ops create ties): one step apart at a few elements, same qparams",
    "vanished_op": "ops that torch.export removes (method:contiguous, nn.Identity, "
    "nn.Dropout in eval, x.size) keep an extra quantize of the same qparams in FX",
    "qat_module": "QAT module patterns (nnqat, nniqat) have no pt2e counterpart",
    "in_place": "an in-place method (x.relu_()) observed in FX runs on the observer's own "
    "input tensor, so FX's observers see the mutated values; pt2e observes copies",
    "complex_pattern": "complex-format patterns with MatchAllNode or extra inputs (onednn's "
    "conv-add-relu) need a tree matcher the pt2e rule table does not have",
    "pt2e_placement": "the spec's pt2e policy keys (quantize, output, extra_inputs, chain_input, "
    "input_shapes, scalars, consumers) place observers the way a hand-written pt2e Quantizer "
    "does; prepare_fx has no such choices and observes as torch's BackendConfig says",
}


@dataclass
class FlowResult:
    """A quantized model, its output on the example batch and its activation quantize ops."""

    model: Any
    output: torch.Tensor
    qparams: list[tuple[float, int] | None]

    @property
    def quantize_ops(self) -> int:
        return len(self.qparams)


@dataclass
class Comparison:
    """FX and pt2e on one model."""

    name: str
    reference: torch.Tensor
    fx: FlowResult
    pt2e: FlowResult
    #: check's row of the FX side (its verdict, whatever the flow).
    fx_check: ModelResult | None = None
    classes: list[str] = field(default_factory=list)

    @property
    def max_diff(self) -> float:
        return float((self.fx.output - self.pt2e.output).abs().max())

    @property
    def identical(self) -> bool:
        return self.max_diff == 0.0 and self.fx.quantize_ops == self.pt2e.quantize_ops

    @property
    def between_db(self) -> float:
        return sqnr(self.fx.output, self.pt2e.output)

    @property
    def fx_db(self) -> float:
        return sqnr(self.reference, self.fx.output)

    @property
    def pt2e_db(self) -> float:
        return sqnr(self.reference, self.pt2e.output)


def sqnr(reference: torch.Tensor, other: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio in dB (``inf`` when identical)."""
    noise = (reference.float() - other.float()).norm()
    if noise == 0:
        return math.inf
    return float(20 * torch.log10(reference.float().norm() / noise))


def run_fx(
    name: str,
    backend_config: BackendConfig,
    model: nn.Module,
    example_inputs: tuple,
    engine: str | None = None,
) -> tuple[FlowResult, ModelResult]:
    """FX through ``check``'s own pipeline (:func:`backend_spec.check.run.quantize_fx`: the
    same QConfigs, calibration and conversions, so the FX verdict is ``check``'s in every
    flow): the reference model's result, and the check's row. :class:`FxFailed` when the
    model fails before a reference model exists."""
    run = quantize_fx(name, model, example_inputs, backend_config, engine)
    if run.reference is None:
        raise FxFailed(run.result)
    output = first_tensor(run.reference_output)
    return FlowResult(run.reference, output, activation_qparams(run.reference)), run.result


class FxFailed(Exception):
    """The FX side failed before a reference model existed; ``result`` is check's row."""

    def __init__(self, result: ModelResult) -> None:
        super().__init__(result.reason)
        self.result = result


def run_pt2e(
    quantizer: Any, model: nn.Module, example_inputs: tuple, batches: list[tuple]
) -> FlowResult:
    """Export, ``prepare_pt2e``, calibrate, ``convert_pt2e`` (torchao's per-call work reused:
    :mod:`.reuse`)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from backend_spec.pt2e.reuse import reused_patterns

    with quiet(), warnings.catch_warnings(), torch.no_grad(), reused_patterns():
        warnings.simplefilter("ignore", UserWarning)  # export's notes on RNN flat weights
        exported = torch.export.export(copy.deepcopy(model), example_inputs).module()
        prepared = prepare_pt2e(exported, quantizer)
        for batch in batches:
            prepared(*batch)
        converted = convert_pt2e(prepared)
        output = converted(*example_inputs)
    return FlowResult(converted, first_tensor(output), activation_qparams(converted))


def compare(
    name: str,
    backend_config: BackendConfig,
    quantizer_factory: Callable[[], Any],
    model_factory: Callable[[], tuple[nn.Module, tuple]],
    *,
    engine: str | None = None,
) -> Comparison:
    """Quantize ``model_factory()``'s model with both flows (same calibration) and compare;
    ``engine``: FX's QConfigs are tuned for it and FX lowers to it, as ``check`` does (the
    quantizer must be built for the same engine)."""
    model, example_inputs = model_factory()
    with torch.no_grad():
        reference = first_tensor(model.eval()(*example_inputs))
    fx, fx_check = run_fx(name, backend_config, model, example_inputs, engine)
    quantizer = quantizer_factory()
    pt2e = run_pt2e(quantizer, model, example_inputs, calibration(example_inputs))
    result = Comparison(name, reference, fx, pt2e, fx_check=fx_check)
    if not result.identical:
        result.classes = explain_difference(model, fx, result.pt2e)
        skipped = getattr(getattr(quantizer, "report", None), "skipped", ())
        if any("complex-format" in reason for _label, reason in skipped):
            result.classes.append("complex_pattern")
        if any(rule.policy != Policy() for rule in getattr(quantizer, "rules", ())):
            result.classes.append("pt2e_placement")
    return result


def activation_qparams(model: Any) -> list[tuple[float, int] | None]:
    """(scale, zero point) of each activation quantize call of a converted model, in graph
    order (``None`` for dynamic ones); weights, whose input is a ``get_attr``, are left out."""
    found: list[tuple[float, int] | None] = []
    for node in model.graph.nodes:
        target = str(node.target)
        if node.op != "call_function" or "quantize_per" not in target or "dequantize" in target:
            continue
        source = node.args[0] if node.args else None
        if isinstance(source, torch.fx.Node) and source.op == "get_attr":
            continue
        if "dynamic" in target or len(node.args) < 3:
            found.append(None)
            continue
        scale, zero_point = (_value(model, arg) for arg in node.args[1:3])
        found.append(None if scale is None else (round(float(scale), 9), int(zero_point)))
    return found


def _value(model: Any, arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        if arg.op != "get_attr":
            return None
        value = model
        for part in str(arg.target).split("."):
            value = getattr(value, part)
        return value
    return arg


def explain_difference(model: nn.Module, fx: FlowResult, pt2e: FlowResult) -> list[str]:
    """The documented classes that apply to this model and its results (empty: unexplained).

    Rounding ties are the only class accepted without a structural cause, and only when both
    flows quantize the same tensors with the very same qparams."""
    classes = []
    modules = list(model.modules())
    fx_modules = list(fx.model.modules())
    fx_targets = [str(n.target) for n in fx.model.graph.nodes if n.op == "call_function"]
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in fx_modules) or any(
        "batch_norm" in target for target in fx_targets
    ):
        classes.append("bn_folding")
    if any(isinstance(m, (nn.Embedding, nn.EmbeddingBag)) for m in modules):
        classes.append("weight_only_embedding")
    if any(isinstance(m, (nn.RNNBase, nn.RNNCellBase)) for m in modules):
        classes.append("recurrent")
    if any("dynamic" in target for target in fx_targets):
        classes.append("dynamic")
    if fx.qparams and sorted(fx.qparams, key=repr) == sorted(pt2e.qparams, key=repr):
        classes.append("rounding_ties")
    methods = {str(n.target) for n in fx.model.graph.nodes if n.op == "call_method"}
    if any(name.endswith("_") and not name.startswith("_") for name in methods):
        classes.append("in_place")
    if methods & _VANISHING_METHODS or any(isinstance(m, _VANISHING_MODULES) for m in modules):
        classes.append("vanished_op")
    return classes


_VANISHING_METHODS = {"contiguous", "detach", "detach_", "size"}
_VANISHING_MODULES = (nn.Identity, nn.Dropout)


def first_tensor(output: Any) -> torch.Tensor:
    """The first tensor of a model output (RNNs return tuples)."""
    while isinstance(output, (tuple, list)):
        output = output[0]
    return output.detach()
