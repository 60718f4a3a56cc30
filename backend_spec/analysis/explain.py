"""``bespec explain``: why each node of a model was, or was not, quantized under a backend.

prepare_fx skips a node silently when its QConfig does not satisfy any of the DTypeConfigs of
the pattern it matched (PyTorch's BackendConfig tutorial quantizes nothing for this reason).
This module runs torch's own steps up to that decision (QuantizationTracer, fusion,
``_find_matches``, ``_set_target_dtype_info_for_matched_node_pattern``) and takes torch's verdict
from ``_is_pattern_dtype_config_and_qconfig_supported_by_backend``; for each rejected
DTypeConfig it then spells out which dtype or constraint failed, following the checks of
``_is_input_arg_dtype_supported_by_backend``, ``_is_output_dtype_supported_by_backend`` and
``_qconfig_satisfies_dtype_config_constraints`` one by one.
"""

from __future__ import annotations

import copy
import importlib
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from backend_spec._torch import quiet, torch
from backend_spec.names.dtypes import fx_quantized_twin
from backend_spec.names.importer import call_ref, import_ref, object_of
from backend_spec.names.labels import config_label, dtype_label, object_label, pattern_label

# -- the tutorial's model ----------------------------------------------------------------------


class TutorialModel(torch.nn.Module):
    """The model of PyTorch's BackendConfig tutorial: linear, conv, bn, relu, sigmoid (the
    tutorial's third outcome drops the bn: ``use_bn=False``)."""

    def __init__(self, use_bn: bool = True) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(10, 3)
        self.conv = torch.nn.Conv2d(3, 3, 3)
        self.bn = torch.nn.BatchNorm2d(3)
        self.relu = torch.nn.ReLU()
        self.sigmoid = torch.nn.Sigmoid()
        self.use_bn = use_bn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = self.conv(x)
        if self.use_bn:
            x = self.bn(x)
        x = self.relu(x)
        return self.sigmoid(x)


def tutorial_model() -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """A ``--model`` factory: the tutorial's model and example input (``bespec explain
    specs/tutorial.yaml --model backend_spec.analysis.explain:tutorial_model``)."""
    torch.manual_seed(0)
    return TutorialModel().eval(), (torch.rand(1, 3, 10, 10),)


# -- references typed on the command line ------------------------------------------------------


def model_from_factory(ref: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """``(model, example_inputs)`` from a ``module:factory`` reference."""
    factory = import_ref(ref)
    result = call_ref(factory, ref) if callable(factory) else factory
    if (
        not isinstance(result, tuple)
        or len(result) != 2
        or not isinstance(result[0], torch.nn.Module)
    ):
        raise ValueError(f"{ref} must return (model, example_inputs)")
    model, inputs = result
    return model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def qconfig_mapping_from(ref: str) -> Any:
    """The QConfigMapping ``module:attr`` names (or builds, naming a function)."""
    from torch.ao.quantization import QConfigMapping

    return object_of(ref, QConfigMapping, "QConfigMapping")


def torch_default_mapping() -> Any:
    """torch's ``get_default_qconfig_mapping()`` (quint8 activations, as the tutorial uses)."""
    from torch.ao.quantization import get_default_qconfig_mapping

    with quiet():
        return get_default_qconfig_mapping()


def spec_mapping(backend_config: Any) -> Any:
    """The spec's own QConfigMapping (:func:`backend_spec.qconfig_mapping`): the default, so a
    qint8 spec is explained with qint8 QConfigs rather than torch's quint8 ones."""
    from backend_spec.analysis.qconfigs import qconfig_mapping

    return qconfig_mapping(backend_config)


# -- the report --------------------------------------------------------------------------------


@dataclass
class NodeReport:
    """One node of the (fused) graph: what it is, what matched it, and the outcome."""

    node: str
    op: str
    pattern: str | None = None
    #: The fusion pattern that built this node's module (``(nn.Conv2d, nn.BatchNorm2d,
    #: nn.ReLU)`` for the ConvReLU2d it folded into), if any.
    fused_from: str | None = None
    #: "quantized", "not converted" (observed by prepare, but convert_fx does not quantize with
    #: its dtype), "skipped" (matched, but no DTypeConfig fits its QConfig), "no qconfig",
    #: "not quantized" (matched a pattern that quantizes nothing) or "no pattern".
    outcome: str = "no pattern"
    reasons: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    backend: str
    nodes: list[NodeReport] = field(default_factory=list)
    #: Patterns of the spec file itself that matched no node (and fused nothing).
    unmatched_patterns: list[str] = field(default_factory=list)
    #: How many patterns inherited through ``extends`` matched nothing (not listed).
    unmatched_inherited: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(
    backend_config: Any,
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    qconfig_mapping: Any,
    own_pattern: Callable[[Any], bool] | None = None,
) -> Explanation:
    """Explain prepare_fx's decisions for ``model`` under ``backend_config``.

    ``own_pattern(config)`` tells which pattern entries belong to the spec itself (the others,
    inherited through ``extends``, are only counted when they match nothing).
    """
    with quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns once per rejected QConfig; we explain
        traced = _Traced(backend_config, model, qconfig_mapping)
        report = Explanation(backend_config.name)
        report.nodes = [traced.node_report(node) for node in traced.graph_module.graph.nodes]
        report.nodes = [n for n in report.nodes if n is not None]
        _unmatched(report, traced, own_pattern or (lambda config: True))
    return report


class _Traced:
    """The model traced and fused as prepare_fx does it, with matches and target dtypes set."""

    def __init__(self, backend_config: Any, model: torch.nn.Module, qconfig_mapping: Any):
        from torch.ao.quantization.backend_config.utils import (
            get_fusion_pattern_to_root_node_getter,
        )
        from torch.ao.quantization.fx.custom_config import FuseCustomConfig
        from torch.ao.quantization.fx.match_utils import _find_matches
        from torch.ao.quantization.fx.pattern_utils import _sorted_patterns_dict
        from torch.ao.quantization.fx.quantize_handler import _get_pattern_to_quantize_handlers
        from torch.ao.quantization.fx.tracer import QuantizationTracer
        from torch.ao.quantization.quantize_fx import _attach_meta_to_node_if_not_exist, _fuse_fx

        self.backend_config = backend_config
        model = copy.deepcopy(model).eval()
        tracer = QuantizationTracer([], [])
        graph_module = torch.fx.GraphModule(model, tracer.trace(model))
        _attach_meta_to_node_if_not_exist(graph_module)
        #: fused node name -> the fusion pattern (torch's reversed nested format).
        self.fusions = _fusion_matches(graph_module, backend_config)
        self.graph_module = _fuse_fx(graph_module, False, FuseCustomConfig(), backend_config)
        self.modules = dict(self.graph_module.named_modules(remove_duplicate=False))
        self.qconfigs = self._node_qconfigs(qconfig_mapping, tracer.node_name_to_scope)
        handlers = _sorted_patterns_dict(_get_pattern_to_quantize_handlers(backend_config))
        self.matches = _find_matches(
            self.graph_module.graph,
            self.modules,
            handlers,
            get_fusion_pattern_to_root_node_getter(backend_config),
        )
        self._set_target_dtypes()

    def _node_qconfigs(self, qconfig_mapping: Any, scopes: Any) -> dict[str, Any]:
        from torch.ao.quantization.fx.qconfig_mapping_utils import (
            _generate_node_name_to_qconfig,
            _get_flattened_qconfig_dict,
            _update_qconfig_for_fusion,
        )
        from torch.ao.quantization.quantize import propagate_qconfig_

        qconfig_mapping = copy.deepcopy(qconfig_mapping)
        _update_qconfig_for_fusion(self.graph_module, qconfig_mapping)
        propagate_qconfig_(self.graph_module, _get_flattened_qconfig_dict(qconfig_mapping), {})
        return _generate_node_name_to_qconfig(
            self.graph_module, self.modules, self.graph_module.graph, qconfig_mapping, scopes
        )

    def _set_target_dtypes(self) -> None:
        # ``torch.ao.quantization.fx.prepare`` is shadowed by the function of that name.
        fx_prepare = importlib.import_module("torch.ao.quantization.fx.prepare")

        for node in self.graph_module.graph.nodes:
            node.meta["target_dtype_info"] = copy.copy(
                fx_prepare._DEFAULT_FP32_QCONFIG_FOR_TARGET_DTYPE_INFO
            )
        cache: dict[Any, bool] = {}
        processed: set[Any] = set()
        for name, (last_node, matched, _pattern, handler) in self.matches.items():
            fx_prepare._set_target_dtype_info_for_matched_node_pattern(
                matched,
                last_node,
                self.qconfigs.get(name),
                handler,
                self.backend_config,
                self.modules,
                cache,
                processed,
            )

    def op_label(self, node: Any) -> str:
        if node.op == "call_module":
            return f"{node.target}: {object_label(type(self.modules[node.target]))}"
        if node.op == "call_method":
            return f"method:{node.target}"
        return object_label(node.target)

    def pattern_config(self, pattern: Any) -> Any:
        return self.backend_config._pattern_complex_format_to_config.get(pattern)

    def node_report(self, node: Any) -> NodeReport | None:
        if node.op not in ("call_module", "call_function", "call_method"):
            return None
        report = NodeReport(node.name, self.op_label(node))
        fusion = self.fusions.get(node.name)
        if fusion is not None:
            report.fused_from = _pattern_label(self.pattern_config(fusion), fusion)
        match = self.matches.get(node.name)
        if match is None:
            report.reasons.append("no pattern of the backend matches this node")
            return report
        _last, matched, pattern, _handler = match
        config = self.pattern_config(pattern)
        report.pattern = _pattern_label(config, pattern)
        qconfig = self.qconfigs.get(node.name)
        if qconfig is None:
            report.outcome = "no qconfig"
            report.reasons.append("the QConfigMapping gives this node no qconfig")
            return report
        if not config.dtype_configs:
            report.outcome = "not quantized"
            report.reasons.append("the pattern has no dtype_configs")
            return report
        from torch.ao.quantization.fx.prepare import (
            _is_pattern_dtype_config_and_qconfig_supported_by_backend,
        )

        if _is_pattern_dtype_config_and_qconfig_supported_by_backend(
            pattern, matched, qconfig, self.backend_config
        ):
            left = self.convert_failures(pattern, matched)
            report.outcome = "not converted" if left else "quantized"
            report.reasons = left
            return report
        report.outcome = "skipped"
        report.reasons = self.rejections(config, pattern, matched, qconfig)
        return report

    def convert_failures(self, pattern: Any, matched: Any) -> list[str]:
        """Why ``convert_fx`` leaves a node that prepare observes float (or fails on it): it
        quantizes only with torch's quantized dtypes, so an observer of a plain integer dtype
        (``uint8`` where FX needs ``quint8``) makes no quantize node, and a weight of one
        raises. [] when convert quantizes what prepare observed."""
        from torch.ao.quantization.backend_config.utils import (
            get_fusion_pattern_to_root_node_getter,
        )
        from torch.ao.quantization.fx.quantize_handler import _default_root_node_getter

        getter = get_fusion_pattern_to_root_node_getter(self.backend_config).get(
            pattern, _default_root_node_getter
        )
        root, output = getter(matched), matched[0]
        found = []
        for node, key, role in (
            (root, "input_act_obs_or_fq_ctr", "input"),
            (output, "output_act_obs_or_fq_ctr", "output"),
            (root, "weight_obs_or_fq_ctr", "weight"),
        ):
            observer, dtype = _observed(node, key)
            if role == "weight" and not self._has_weight(root):
                continue
            twin = _fx_twin(dtype)
            if twin is None or getattr(observer, "is_dynamic", False):
                continue
            effect = (
                "convert_fx fails on it (Unsupported dtype and qscheme)"
                if role == "weight"
                else "convert_fx leaves it float"
            )
            found.append(
                f"{role} observed as {dtype_label(dtype)}: FX quantizes with {twin}, so "
                f"{effect}; write {twin} (pt2e reads it as {dtype_label(dtype)})"
            )
        return found

    def _has_weight(self, node: Any) -> bool:
        """Whether convert quantizes a weight for this node (a module's or an argument)."""
        from torch.ao.quantization.fx.utils import node_arg_is_weight

        if node.op == "call_module":
            weight = getattr(self.modules.get(node.target), "weight", None)
            return isinstance(weight, torch.Tensor)
        return any(node_arg_is_weight(node, a) for a in _flat_nodes([*node.args]))

    def rejections(self, config: Any, pattern: Any, matched: Any, qconfig: Any) -> list[str]:
        """Why each DTypeConfig of the pattern rejects the node's QConfig."""
        from torch.ao.quantization.backend_config.utils import (
            get_fusion_pattern_to_root_node_getter,
        )
        from torch.ao.quantization.fx.quantize_handler import _default_root_node_getter

        getter = get_fusion_pattern_to_root_node_getter(self.backend_config).get(
            pattern, _default_root_node_getter
        )
        root, output = getter(matched), matched[0]
        reasons = []
        many = len(config.dtype_configs) > 1
        for i, dtype_config in enumerate(config.dtype_configs):
            failures = _dtype_config_failures(root, output, qconfig, dtype_config)
            failures = failures or ["rejected by torch (no further detail)"]
            prefix = f"dtype_configs[{i}]: " if many else ""
            reasons.extend(prefix + f for f in failures)
        return reasons


def _fusion_matches(graph_module: Any, backend_config: Any) -> dict[str, Any]:
    """Node name -> fusion pattern, for every fusion torch's fuser will apply (the fused node
    keeps the name of the pattern's root node)."""
    from torch.ao.quantization.backend_config.utils import get_fusion_pattern_to_root_node_getter
    from torch.ao.quantization.fx.fuse import _find_matches as find_fusions
    from torch.ao.quantization.fx.fuse import _get_fusion_pattern_to_fuse_handler_cls
    from torch.ao.quantization.fx.pattern_utils import _sorted_patterns_dict

    handlers = _sorted_patterns_dict(_get_fusion_pattern_to_fuse_handler_cls(backend_config))
    getters = get_fusion_pattern_to_root_node_getter(backend_config)
    fusions = {}
    for _name, (_last, pattern, matched, _obj, _sub) in find_fusions(
        graph_module, graph_module.graph, handlers
    ).items():
        getter = getters.get(pattern, _default_root)
        fusions[getter(matched).name] = pattern
    return fusions


def _default_root(node_pattern: Any) -> Any:
    """torch's default root node getter of a fusion: the innermost, first op of the pattern."""
    while not isinstance(node_pattern[-1], torch.fx.Node):
        node_pattern = node_pattern[-1]
    return node_pattern[-1]


def _pattern_label(config: Any, pattern: Any) -> str:
    return config_label(config) if config is not None else pattern_label(pattern)


# -- the checks, one failure at a time ---------------------------------------------------------


def _observer(ctr: Any) -> Any:
    return ctr() if ctr is not None else None


def _observed(node: Any, key: str) -> tuple[Any, Any]:
    """The observer torch chose for ``key`` of a node's target dtype info, and its dtype."""
    observer = _observer(node.meta["target_dtype_info"].get(key))
    return observer, getattr(observer, "dtype", None)


def _dtype_config_failures(root: Any, output: Any, qconfig: Any, dtype_config: Any) -> list[str]:
    """Every reason a DTypeConfig rejects a QConfig, in torch's order of checks."""
    from torch.ao.quantization.fx.utils import node_arg_is_bias, node_arg_is_weight

    failures: list[str] = []
    for arg in _flat_nodes([*root.args, *root.kwargs.values()]):
        if node_arg_is_weight(root, arg):
            failures += _weight_failures(root, qconfig, dtype_config)
        elif node_arg_is_bias(root, arg):
            failures += _bias_failures(root, dtype_config)
        else:
            failures += _input_failures(root, qconfig, dtype_config)
    failures += _output_failures(output, qconfig, dtype_config)
    return list(dict.fromkeys(failures))


def _fx_twin(dtype: Any) -> str | None:
    """The quantized dtype FX needs for an observed plain integer ``dtype`` (else None)."""
    if not isinstance(dtype, torch.dtype):
        return None
    return fx_quantized_twin(str(dtype).removeprefix("torch."))


def _flat_nodes(args: list[Any]) -> list[Any]:
    out = []
    for arg in args:
        if isinstance(arg, (list, tuple)):
            out += _flat_nodes(list(arg))
        elif isinstance(arg, torch.fx.Node):
            out.append(arg)
    return out


def _dtype_mismatch(role: str, dtype: Any, wanted: Any) -> list[str]:
    """The failure of an observed dtype that is not the one the config wants ([] if it is)."""
    if dtype == wanted:
        return []
    return [f"{role} dtype {dtype_label(dtype)} but the config wants {dtype_label(wanted)}"]


def _input_failures(root: Any, qconfig: Any, dtype_config: Any) -> list[str]:
    wanted = dtype_config.input_dtype
    if wanted is None:
        return []
    observer, dtype = _observed(root, "input_act_obs_or_fq_ctr")
    dynamic = bool(getattr(observer, "is_dynamic", False))
    if dtype != wanted:
        return _dtype_mismatch("input", dtype, wanted)
    if dynamic != bool(dtype_config.is_dynamic):
        return [
            f"input is {'dynamic' if dynamic else 'static'} but the config wants "
            f"is_dynamic={bool(dtype_config.is_dynamic)}"
        ]
    return constraint_failures(
        qconfig.activation, dtype_config.input_dtype_with_constraints, "input"
    )


def _weight_failures(root: Any, qconfig: Any, dtype_config: Any) -> list[str]:
    wanted = dtype_config.weight_dtype
    if wanted is None:
        return []
    _, dtype = _observed(root, "weight_obs_or_fq_ctr")
    if dtype != wanted:
        return _dtype_mismatch("weight", dtype, wanted)
    return constraint_failures(qconfig.weight, dtype_config.weight_dtype_with_constraints, "weight")


def _bias_failures(root: Any, dtype_config: Any) -> list[str]:
    wanted = dtype_config.bias_dtype
    _, dtype = _observed(root, "bias_obs_or_fq_ctr")
    return [] if wanted is None else _dtype_mismatch("bias", dtype, wanted)


def _output_failures(output: Any, qconfig: Any, dtype_config: Any) -> list[str]:
    from torch.ao.quantization.fx.prepare import _DEFAULT_FP32_OBS_OR_FQ_CTR

    wanted = dtype_config.output_dtype
    if wanted is None:
        return []
    ctr = output.meta["target_dtype_info"].get(
        "output_act_obs_or_fq_ctr", _DEFAULT_FP32_OBS_OR_FQ_CTR
    )
    observer = _observer(ctr)
    dtype = getattr(observer, "dtype", None)
    if getattr(observer, "is_dynamic", False):
        dtype = torch.float32
    if dtype != wanted:
        return _dtype_mismatch("output", dtype, wanted)
    return constraint_failures(
        qconfig.activation, dtype_config.output_dtype_with_constraints, "output"
    )


def constraint_failures(observer_ctr: Any, constraints: Any, what: str) -> list[str]:
    """Why an observer (from a QConfig) fails DTypeWithConstraints, in the terms of torch's
    ``_qconfig_satisfies_dtype_config_constraints``; [] when it satisfies them."""
    from torch.ao.quantization.fx.utils import _get_observer_from_activation_post_process

    if observer_ctr is None or constraints.dtype is None:
        return []
    post_process = observer_ctr()
    if post_process.dtype != constraints.dtype:
        return []  # torch does not check constraints of another dtype
    observer = _get_observer_from_activation_post_process(post_process)
    kind = "weight observer" if what == "weight" else f"{what} activation observer"
    return [
        *_range_failures(observer, constraints, kind),
        *_scale_failures(observer, constraints, kind),
        *_fixed_failures(post_process, observer, constraints, kind),
    ]


def _range_failures(observer: Any, c: Any, kind: str) -> list[str]:
    low, high = c.quant_min_lower_bound, c.quant_max_upper_bound
    if low is None or high is None:
        return []
    qmin, qmax = getattr(observer, "quant_min", None), getattr(observer, "quant_max", None)
    if qmin is None or qmax is None:
        return [f"{kind} {type(observer).__name__} has no quant_min/quant_max to check"]
    out = []
    if qmin < low:
        out.append(f"{kind} quant_min {qmin} below quant_min_lower_bound {low}")
    if qmax > high:
        out.append(f"{kind} quant_max {qmax} above quant_max_upper_bound {high}")
    return out


def _scale_failures(observer: Any, c: Any, kind: str) -> list[str]:
    bound = c.scale_min_lower_bound
    if bound is None:
        return []
    eps = getattr(observer, "eps", None)
    if eps is None:
        return [f"{kind} {type(observer).__name__} has no eps to check against scale_min"]
    eps = float(eps)
    if eps < bound:
        return [f"{kind} eps {eps:.3g} is below scale_min_lower_bound {bound:.3g}"]
    return []


def _fixed_failures(post_process: Any, observer: Any, c: Any, kind: str) -> list[str]:
    from torch.ao.quantization.fake_quantize import FixedQParamsFakeQuantize
    from torch.ao.quantization.observer import FixedQParamsObserver

    scale, zero_point = c.scale_exact_match, c.zero_point_exact_match
    if scale is None or zero_point is None:
        return []
    if not isinstance(post_process, (FixedQParamsObserver, FixedQParamsFakeQuantize)):
        return [
            f"{kind} is a {type(post_process).__name__}, but fixed qparams (scale {scale}, "
            f"zero_point {zero_point}) need a FixedQParamsObserver"
        ]
    if observer.scale != scale or observer.zero_point != zero_point:
        return [
            f"{kind} fixed qparams ({float(observer.scale)}, {int(observer.zero_point)}) differ "
            f"from scale_exact_match {scale} and zero_point_exact_match {zero_point}"
        ]
    return []


# -- patterns that matched nothing -------------------------------------------------------------


def _unmatched(report: Explanation, traced: _Traced, own: Callable[[Any], bool]) -> None:
    matched = {pattern for (_n, _m, pattern, _h) in traced.matches.values()}
    matched |= set(traced.fusions.values())
    for pattern, config in traced.backend_config._pattern_complex_format_to_config.items():
        if pattern in matched:
            continue
        if own(config):
            report.unmatched_patterns.append(_pattern_label(config, pattern))
        else:
            report.unmatched_inherited += 1


def explain_compiled(
    compiled: Any, model: torch.nn.Module, example_inputs: tuple[Any, ...], qconfig_mapping: Any
) -> Explanation:
    """:func:`explain` for a loader ``Compiled``: the spec's own patterns are those whose
    origin is a file rather than a built-in base (``torch:NAME``)."""
    from backend_spec.ir.lift import pattern_key

    def own(config: Any) -> bool:
        entry = compiled.backend.entry(pattern_key(config))
        return entry is None or not entry.origin.source.startswith("torch:")

    return explain(compiled.backend_config, model, example_inputs, qconfig_mapping, own)
