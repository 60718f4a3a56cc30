"""QAT in pt2e: the spec's fake-quantizes in the rule table, and FX QAT versus pt2e QAT.

The QAT rule table is read off the same QAT QConfigs ``prepare_qat_fx`` gets from
``backend_spec.qconfig_mapping(spec, qat=True)`` (one source of truth for the ``fake_quant``
kinds: :func:`backend_spec.analysis.qconfigs.fake_quant`): each spec records its observer and
the fake-quantize kind that wraps it, and the runtime builds torchao's class of that kind.

Conv-bn chains are annotated the way torchao's XNNPACK and X86 quantizers annotate them for
QAT: ``prepare_qat_pt2e`` annotates the graph *before* it folds anything, so a
conv -> batch_norm (-> relu) chain keeps its ``aten.batch_norm`` node and is one pattern (input
and weight on the conv, output on the last op); torchao's ``_fuse_conv_bn_qat`` then rewrites it
into the simulated-fold form that carries those annotations. Module fusions resolve the way
``prepare_qat_fx`` fuses: the fuser is called with ``is_qat=True`` (``nni.ConvBnReLU2d``, where
PTQ gets ``nni.ConvReLU2d``).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.analysis.qconfigs import FAKE_QUANT_KINDS
from backend_spec.ir import Entry

if TYPE_CHECKING:  # the rule compiler imports this module; the comparison loads FX lazily
    from backend_spec.pt2e import flows

nn = torch.nn

#: How FX QAT and pt2e QAT may legitimately differ, beyond :data:`flows.DIFFERENCE_CLASSES`.
QAT_DIFFERENCE_CLASSES: dict[str, str] = {
    "qat_bn_unfolded": "FX QAT fuses BatchNorm into the Linear or Conv3d before it "
    "(nniqat.LinearBn1d, ConvBn3d) and folds it at convert; torchao's QAT fold covers conv1d "
    "and conv2d only, so pt2e keeps the BatchNorm as a float op",
}

#: (producer, BatchNorm) module pairs FX QAT folds and pt2e QAT does not.
_UNFOLDED_PAIRS = ((nn.Linear, nn.BatchNorm1d), (nn.Conv3d, nn.BatchNorm3d))


def fake_quant_kind(instance: Any) -> str | None:
    """The ``fake_quant`` kind of a torch.ao fake-quantize instance (None: not one, or fixed
    qparams, which torchao fake-quantizes by itself for QAT)."""
    from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize
    from torch.ao.quantization.fake_quantize import (
        FakeQuantize,
        FixedQParamsFakeQuantize,
        FusedMovingAvgObsFakeQuantize,
    )

    classes = {
        FusedMovingAvgObsFakeQuantize: "fused_moving_avg",
        _LearnableFakeQuantize: "learnable",
        FixedQParamsFakeQuantize: None,
        FakeQuantize: "fake_quantize",
    }
    kind = classes.get(type(instance))
    assert kind is None or kind in FAKE_QUANT_KINDS
    return kind


def spec_data(instance: Any, observer_data: Callable[[Any], dict[str, Any] | None]) -> Any:
    """The table spec of an observer or fake-quantize instance: ``observer_data`` of its
    observer, plus ``fake_quant`` (the kind) for a fake-quantize."""
    from torch.ao.quantization.fake_quantize import FakeQuantizeBase

    if not isinstance(instance, FakeQuantizeBase):
        return observer_data(instance)
    data = observer_data(instance.activation_post_process)
    kind = fake_quant_kind(instance)
    if data is not None and kind is not None and data["kind"] == "observed":
        data["fake_quant"] = kind
    return data


def qat_swap(entry: Entry, by_pattern: dict[Any, Entry]) -> Entry | None:
    """The entry FX QAT quantizes a module op with: ``prepare_qat_fx`` swaps the module for the
    entry's ``qat_module`` before matching, so that class's own entry decides (None: no entry
    quantizes it, and the op stays float)."""
    qat_module = entry.get("qat_module")
    if qat_module is None:
        return entry
    return by_pattern.get(qat_module)


@functools.lru_cache(maxsize=256)
def qat_fused_type(fuser: Any, ops: tuple) -> type | None:
    """The class ``fuser`` builds for QAT (``fuser(True, *modules)`` on training-mode modules,
    as ``prepare_qat_fx`` fuses); None when it refuses (ConvTranspose-BN has no QAT fusion)."""
    from backend_spec._torch import BackendPatternConfig
    from backend_spec.check.synthesize import synthesize

    try:
        with quiet():
            made = synthesize(BackendPatternConfig(ops))
            modules = [getattr(made.model.train(), ref.target) for ref in made.ops]
            return type(fuser(True, *modules))
    except Exception:  # a fuser without QAT support: the entry decides
        return None


# --- FX QAT versus pt2e QAT ------------------------------------------------------------------


def run_fx_qat(
    backend_config: BackendConfig, model: nn.Module, example_inputs: tuple, batches: list[tuple]
) -> flows.FlowResult:
    """``prepare_qat_fx`` with the spec's QAT QConfigs, training-mode forward passes, frozen
    observers, then ``convert_to_reference_fx`` in eval mode.

    Observers are frozen (as a QAT recipe does before convert) because FX's convert otherwise
    runs the weight fake-quantize once more on the BN-folded weight (torch issue 73941), which
    pt2e's convert does not: the weight scale would change after training."""
    from backend_spec.analysis.qconfigs import qconfig_mapping
    from backend_spec.check.run import forward_passes
    from backend_spec.pt2e import flows

    with quiet():
        from torch.ao.quantization import disable_observer
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_qat_fx

    with quiet(), torch.no_grad():
        prepared = prepare_qat_fx(
            copy.deepcopy(model).train(),
            qconfig_mapping(backend_config, qat=True),
            example_inputs,
            backend_config=backend_config,
        )
        forward_passes(prepared, batches)  # seeded: dropout draws as in pt2e
        prepared.apply(disable_observer)  # frozen, else convert re-observes folded weights
        converted = convert_to_reference_fx(prepared.eval(), backend_config=backend_config)
        output = converted(*example_inputs)
    return flows.FlowResult(
        converted, flows.first_tensor(output), flows.activation_qparams(converted)
    )


def run_pt2e_qat(
    quantizer: Any, model: nn.Module, example_inputs: tuple, batches: list[tuple]
) -> flows.FlowResult:
    """``torch.export`` in training mode, ``prepare_qat_pt2e``, the same forward passes, then
    ``move_exported_model_to_eval`` and ``convert_pt2e``; torchao's conv-bn pattern graphs,
    re-exported by each prepare and convert, are built once per process (:mod:`.reuse`)."""
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.fake_quantize import disable_observer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    from backend_spec.check.run import forward_passes
    from backend_spec.pt2e import flows
    from backend_spec.pt2e.reuse import reused_patterns

    with quiet(), torch.no_grad(), reused_patterns():
        exported = torch.export.export(copy.deepcopy(model).train(), example_inputs).module()
        prepared = prepare_qat_pt2e(exported, quantizer)
        forward_passes(prepared, batches)
        prepared.apply(disable_observer)
        move_exported_model_to_eval(prepared)
        converted = convert_pt2e(prepared)
        output = converted(*example_inputs)
    return flows.FlowResult(
        converted, flows.first_tensor(output), flows.activation_qparams(converted)
    )


def compare_qat(
    name: str,
    backend_config: BackendConfig,
    quantizer_factory: Callable[[], Any],
    model_factory: Callable[[], tuple[nn.Module, tuple]],
) -> flows.Comparison:
    """Train-mode forward passes through both QAT flows (same batches), convert, compare."""
    from backend_spec.pt2e import flows

    model, example_inputs = model_factory()
    batches = flows.calibration(example_inputs)
    with torch.no_grad():
        reference = flows.first_tensor(model.eval()(*example_inputs))
    fx = run_fx_qat(backend_config, model, example_inputs, batches)
    pt2e = run_pt2e_qat(quantizer_factory(), model, example_inputs, batches)
    result = flows.Comparison(name, reference, fx, pt2e)
    if not result.identical:
        result.classes = explain_qat_difference(model, fx, pt2e)
    return result


def explain_qat_difference(
    model: nn.Module, fx: flows.FlowResult, pt2e: flows.FlowResult
) -> list[str]:
    """The documented classes that apply (empty: unexplained)."""
    from backend_spec.pt2e import flows

    classes = flows.explain_difference(model, fx, pt2e)
    if _unfolded_bn(model):
        classes.append("qat_bn_unfolded")
    return classes


def _unfolded_bn(model: nn.Module) -> bool:
    """Whether a Linear feeds a BatchNorm1d or a Conv3d a BatchNorm3d (see
    :data:`_UNFOLDED_PAIRS`)."""
    with quiet():
        try:
            graph = torch.fx.symbolic_trace(model).graph
        except Exception:  # not traceable: FX QAT could not fuse it either
            return False
    modules = dict(model.named_modules())
    for node in graph.nodes:
        producer = node.args[0] if node.op == "call_module" and node.args else None
        if not isinstance(producer, torch.fx.Node) or producer.op != "call_module":
            continue
        pair = (modules.get(producer.target), modules.get(node.target))
        if any(isinstance(pair[0], a) and isinstance(pair[1], b) for a, b in _UNFOLDED_PAIRS):
            return True
    return False
