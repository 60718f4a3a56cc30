"""The pt2e runtime: a torchao Quantizer that interprets a rule table of plain data.

This module imports only ``torch`` and ``torchao`` (never bespec): ``bespec compile --target
pt2e`` copies its source verbatim into a standalone module next to the table, so the module a
user ships needs nothing else. That is also why it imports torch directly instead of through
``backend_spec._torch``.

The table (built by :mod:`backend_spec.pt2e.rules`) is a dict::

    {"format": 1,
     "specs": {NAME: {"kind": "observed"|"fixed", "dtype": "uint8", ...,
                      "fake_quant": KIND (QAT tables only: the observer's fake-quantize)}},
     "rules": [{"label": str, "chain": [[aten target, ...], ...], "where": [...],
                "groups": [int, ...], "observation": "different"|"share"|"none",
                "by_num_args": {str(n): observation}, "input": NAME|None,
                "output": NAME|None, "weight": NAME|None, "quantize": "always"|...}]}

Rules are already sorted longest chain first, then in spec order. Matching mirrors FX's
``_find_matches``: nodes are visited in reverse, a chain is matched backwards from its last op,
each earlier op must be ``args[0]`` of the next one and have exactly one user, and a node is
claimed by the first rule that matches it. Annotation then mirrors FX's observer insertion
(``prepare_fx``): input edges of the first node, the output of the last one, reuse of an
already observed producer (a ``SharedQuantizationSpec``), and input/output sharing for ops
such as ``cat`` and ``max_pool2d``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

_QUIET_LOGGERS = ("torchao", "torch.utils._pytree")


def _import_torchao() -> Any:
    """Import torchao's pt2e pieces without its CPU-only noise ("Failed to load _C ...")."""
    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from torchao.quantization.pt2e import fake_quantize, learnable_fake_quantize, observer
        from torchao.quantization.pt2e import quantizer as quantizer_module
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    fake_quants = {
        "fake_quantize": fake_quantize.FakeQuantize,
        "fused_moving_avg": fake_quantize.FusedMovingAvgObsFakeQuantize,
        "learnable": learnable_fake_quantize.LearnableFakeQuantize,
    }
    return observer, quantizer_module, fake_quants


_observer, _quantizer, FAKE_QUANTS = _import_torchao()
Quantizer = _quantizer.Quantizer
QuantizationAnnotation = _quantizer.QuantizationAnnotation
QuantizationSpec = _quantizer.QuantizationSpec
SharedQuantizationSpec = _quantizer.SharedQuantizationSpec
FixedQParamsQuantizationSpec = _quantizer.FixedQParamsQuantizationSpec

#: Observer classes a table may name (torchao's copies of torch.ao's observers).
OBSERVERS = {
    name: getattr(_observer, name)
    for name in (
        "MinMaxObserver",
        "MovingAverageMinMaxObserver",
        "PerChannelMinMaxObserver",
        "MovingAveragePerChannelMinMaxObserver",
        "HistogramObserver",
        "PlaceholderObserver",
    )
}

#: Schema argument names of an ATen op that carry a weight / a bias / BatchNorm statistics.
_WEIGHT_ARGS = ("weight",)
_SKIPPED_ARGS = ("bias", "running_mean", "running_var")

#: Names of the fx.Node metadata the matcher reads.
_STACK, _TORCH_FN = "nn_module_stack", "torch_fn"

#: Module classes whose insides FX sees (containers); every other torch.nn / torch.ao.nn
#: module is a leaf for FX, so calls inside it are not visible to FX patterns.
_CONTAINERS = ("torch.nn.modules.container.",)
_TORCH_MODULE_PREFIXES = ("torch.nn.", "torch.ao.nn.")


def make_spec(data: dict[str, Any]) -> Any:
    """A torchao QuantizationSpec from a table spec dict."""
    dtype = getattr(torch, data["dtype"])
    qscheme = getattr(torch, data["qscheme"]) if data.get("qscheme") else None
    if data["kind"] == "fixed":
        return FixedQParamsQuantizationSpec(
            dtype=dtype,
            scale=data["scale"],
            zero_point=data["zero_point"],
            quant_min=data.get("quant_min"),
            quant_max=data.get("quant_max"),
            qscheme=qscheme,
        )
    observer = OBSERVERS[data["observer"]]
    kwargs = data.get("observer_kwargs") or {}
    constructor = observer.with_args(**kwargs) if kwargs else observer
    if data.get("fake_quant"):  # QAT (``FAKE_QUANTS`` names the kinds): wrap the observer
        # prepare passes ch_axis only to a "PerChannel" class, so the wrapper carries it.
        axis = {"ch_axis": data["ch_axis"]} if data.get("ch_axis") is not None else {}
        constructor = FAKE_QUANTS[data["fake_quant"]].with_args(observer=constructor, **axis)
    return QuantizationSpec(
        dtype=dtype,
        observer_or_fake_quant_ctr=constructor,
        quant_min=data.get("quant_min"),
        quant_max=data.get("quant_max"),
        qscheme=qscheme,
        ch_axis=data.get("ch_axis"),
        is_dynamic=bool(data.get("is_dynamic", False)),
    )


@dataclass
class Match:
    """One rule matched on a run of nodes (forward order)."""

    rule: dict[str, Any]
    nodes: list[torch.fx.Node]


@dataclass
class Verdict:
    """Why a node was or was not annotated (for ``bespec explain --flow pt2e``)."""

    node: str
    target: str
    rule: str | None
    reason: str


@dataclass
class TableQuantizer(Quantizer):
    """A pt2e Quantizer driven by a rule table (see the module docstring)."""

    table: dict[str, Any]
    matches: list[Match] = field(default_factory=list)
    report: Any = None

    def __post_init__(self) -> None:
        super().__init__()
        self._specs = {name: make_spec(data) for name, data in self.table["specs"].items()}
        self._dtypes = {name: data["dtype"] for name, data in self.table["specs"].items()}
        self._dynamic = {
            name: bool(data.get("is_dynamic")) for name, data in self.table["specs"].items()
        }
        self._rules = self.table["rules"]
        self._by_last: dict[str, list[dict[str, Any]]] = {}
        for rule in self._rules:
            for target in rule["chain"][-1]:
                self._by_last.setdefault(target, []).append(rule)

    # --- torchao Quantizer API --------------------------------------------------------------

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.matches = self.find_matches(model.graph)
        _Annotator(self).run(model.graph, self.matches)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        """Nothing to validate: every annotation comes from the table."""

    # --- matching ---------------------------------------------------------------------------

    def find_matches(self, graph: torch.fx.Graph) -> list[Match]:
        """Longest-first, spec-order matches; each node claimed at most once (as FX)."""
        claimed: set[torch.fx.Node] = set()
        matches: list[Match] = []
        for node in reversed(list(graph.nodes)):
            if node.op != "call_function" or node in claimed:
                continue
            for rule in self._by_last.get(str(node.target), ()):
                nodes = self.match_rule(rule, node, claimed)
                if nodes is not None:
                    claimed.update(nodes)
                    matches.append(Match(rule, nodes))
                    break
        matches.reverse()
        return matches

    def match_rule(
        self, rule: dict[str, Any], last: torch.fx.Node, claimed: set[torch.fx.Node]
    ) -> list[torch.fx.Node] | None:
        """The nodes of ``rule``'s chain ending at ``last``, or ``None``."""
        return _walk_chain(rule, last) if self.why_not(rule, last, claimed) is None else None

    def why_not(
        self, rule: dict[str, Any], last: torch.fx.Node, claimed: set[torch.fx.Node]
    ) -> str | None:
        """``None`` if ``rule`` matches backwards from ``last``, else the first reason why not."""
        chain, where, groups = rule["chain"], rule["where"], rule["groups"]
        node: Any = last
        previous_key = None
        for index in range(len(chain) - 1, -1, -1):
            if not isinstance(node, torch.fx.Node) or node.op != "call_function":
                return f"op {index + 1} of the chain is not an operator call"
            if str(node.target) not in chain[index]:
                return (
                    f"op {index + 1} is {node.target}, the rule needs {' or '.join(chain[index])}"
                )
            if node in claimed:
                return f"{node.name} already belongs to another match"
            problem = provenance_problem(node, where[index])
            if problem:
                return f"{node.name}: {problem}"
            key = _innermost_key(node)
            if (
                index + 1 < len(chain)
                and groups[index] == groups[index + 1]
                and key != previous_key
            ):
                return f"{node.name} is not in the same module call as its successor"
            previous_key = key
            if index == 0:
                return None
            producer = node.args[0] if node.args else None
            if isinstance(producer, torch.fx.Node) and len(producer.users) != 1:
                return f"{producer.name} has {len(producer.users)} users; a chain needs exactly one"
            node = producer
        return None

    def explain(self, model: torch.fx.GraphModule) -> Iterator[Verdict]:
        """Per operator node: the rule that annotated it, or why none did."""
        matches = self.find_matches(model.graph)
        owner = {node: match for match in matches for node in match.nodes}
        claimed = set(owner)
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            target = str(node.target)
            if node in owner:
                match = owner[node]
                yield Verdict(node.name, target, match.rule["label"], _annotated_reason(match))
                continue
            rules = [rule for rule in self._rules if any(target in alts for alts in rule["chain"])]
            if not rules:
                yield Verdict(node.name, target, None, "no rule of the spec has this ATen op")
                continue
            reasons = []
            for rule in rules:
                if target in rule["chain"][-1]:
                    reason = self.why_not(rule, node, claimed - {node})
                else:
                    reason = "the op is not the last of this chain and no chain ends here"
                reasons.append(f"{rule['label']}: {reason}")
            yield Verdict(node.name, target, None, "; ".join(reasons))

    # --- annotation helpers used by _Annotator -----------------------------------------------

    def spec(self, name: str | None) -> Any:
        return None if name is None else self._specs[name]

    def dtype(self, name: str | None) -> str | None:
        return None if name is None or self._dynamic[name] else self._dtypes[name]


def _walk_chain(rule: dict[str, Any], last: torch.fx.Node) -> list[torch.fx.Node]:
    nodes = [last]
    for _ in range(len(rule["chain"]) - 1):
        nodes.append(nodes[-1].args[0])
    nodes.reverse()
    return nodes


def _annotated_reason(match: Match) -> str:
    rule = match.rule
    if rule.get("reason"):
        return f"claimed but left in float: {rule['reason']}"
    return f"annotated ({rule['observation']})"


def _innermost(node: torch.fx.Node) -> tuple[str, str] | None:
    stack = node.meta.get(_STACK) or {}
    if not stack:
        return None
    key, (_path, cls) = list(stack.items())[-1]
    return key, _class_name(cls)


def _innermost_key(node: torch.fx.Node) -> str | None:
    innermost = _innermost(node)
    return None if innermost is None else innermost[0]


def _class_name(cls: Any) -> str:
    if isinstance(cls, str):
        return cls
    return f"{cls.__module__}.{cls.__qualname__}"


def provenance_problem(node: torch.fx.Node, where: dict[str, Any] | None) -> str | None:
    """Whether ``node`` was written the way the spec's op is (module, function or method).

    ATen forgets the spelling; export keeps it in ``nn_module_stack`` (the module calls around
    the node) and ``torch_fn`` (the Python callable). A module op needs its class to be the
    innermost module (or, for a fused container class, any enclosing one); a call needs its
    ``torch_fn`` and no torch module around it (FX does not look inside torch's modules).
    """
    if where is None:
        return None
    stack = node.meta.get(_STACK) or {}
    classes = [_class_name(cls) for _path, cls in stack.values()]
    if "module" in where:
        wanted = where["module"]
        if where.get("container"):
            return None if wanted in classes else f"not inside a {wanted}"
        if classes and classes[-1] == wanted:
            return None
        return f"written as {classes[-1] if classes else 'a call'}, the rule needs module {wanted}"
    if classes and _is_torch_leaf(classes[-1]):
        return f"inside torch module {classes[-1]}, which FX treats as one op"
    torch_fn = node.meta.get(_TORCH_FN)
    kind = torch_fn[1] if torch_fn else None
    if kind not in where["calls"]:
        return f"called as {kind}, the rule needs {' or '.join(where['calls'])}"
    return None


def _is_torch_leaf(class_name: str) -> bool:
    return class_name.startswith(_TORCH_MODULE_PREFIXES) and not class_name.startswith(_CONTAINERS)


def _is_float_tensor(node: Any) -> bool:
    if not isinstance(node, torch.fx.Node):
        return False
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _argument_names(node: torch.fx.Node) -> list[str]:
    schema = getattr(node.target, "_schema", None)
    return [argument.name for argument in schema.arguments] if schema is not None else []


class _Annotator:
    """Writes ``quantization_annotation`` on matched nodes, in forward order, like prepare_fx."""

    def __init__(self, quantizer: TableQuantizer) -> None:
        self.quantizer = quantizer
        #: node -> dtype name of its quantized output (what FX would find already observed).
        self.observed: dict[torch.fx.Node, str] = {}

    def run(self, graph: torch.fx.Graph, matches: list[Match]) -> None:
        for match in matches:
            for node in match.nodes:
                node.meta["quantization_annotation"] = QuantizationAnnotation(_annotated=True)
            self.annotate(match)

    def observation(self, match: Match) -> str:
        rule, first = match.rule, match.nodes[0]
        by_count = rule.get("by_num_args") or {}
        if by_count:
            count = sum(1 for arg in _flat_args(first) if _is_float_tensor(arg))
            return by_count.get(str(count), rule["observation"])
        return rule["observation"]

    def annotate(self, match: Match) -> None:
        rule = match.rule
        if rule.get("reason") or rule["input"] is None:
            return
        observation = self.observation(match)
        if observation == "none":
            return
        first, last = match.nodes[0], match.nodes[-1]
        inputs = self.activation_inputs(first)
        if rule.get("quantize") == "if_input_quantized" and not (
            inputs and inputs[0] in self.observed
        ):
            return
        in_name = rule["input"]
        in_dtype = self.quantizer.dtype(in_name)
        if observation == "share" and not (inputs and _shares_in_graph(inputs[0], in_dtype)):
            observation = "different"
        qspec_map = first.meta["quantization_annotation"].input_qspec_map
        for index, arg in enumerate(inputs):
            if observation == "share" and index > 0:
                qspec_map[arg] = SharedQuantizationSpec((inputs[0], first))
                self.repoint(arg, (inputs[0], first))
            elif in_dtype is not None and self.observed.get(arg) == in_dtype:
                qspec_map[arg] = SharedQuantizationSpec(arg)
            else:
                qspec_map[arg] = self.quantizer.spec(in_name)
        # After the input: prepare_qat_pt2e's conv-bn rewrite reads the map in order (input,
        # weight, bias).
        self.annotate_weights(first, rule, qspec_map)
        self.annotate_output(last, rule, observation, inputs, first)

    def annotate_output(self, last, rule, observation, inputs, first) -> None:
        out_name = rule["output"]
        out_dtype = self.quantizer.dtype(out_name)
        if out_name is None or out_dtype is None:
            return
        annotation = last.meta["quantization_annotation"]
        if observation == "share":
            annotation.output_qspec = SharedQuantizationSpec((inputs[0], first))
        else:
            annotation.output_qspec = self.quantizer.spec(out_name)
        self.observed[last] = out_dtype

    def annotate_weights(self, node: torch.fx.Node, rule: dict[str, Any], qspec_map) -> None:
        names = _argument_names(node)
        for index, arg in enumerate(node.args):
            name = names[index] if index < len(names) else ""
            if name in _WEIGHT_ARGS and _is_float_tensor(arg) and rule.get("weight"):
                qspec_map[arg] = self.quantizer.spec(rule["weight"])

    def activation_inputs(self, node: torch.fx.Node) -> list[torch.fx.Node]:
        """Float tensor inputs of ``node`` other than weights, biases and BN statistics."""
        names = _argument_names(node)
        found: list[torch.fx.Node] = []
        for index, arg in enumerate(node.args):
            name = names[index] if index < len(names) else ""
            if name in _WEIGHT_ARGS or name in _SKIPPED_ARGS:
                continue
            items = arg if isinstance(arg, (list, tuple)) else [arg]
            found.extend(item for item in items if _is_float_tensor(item) and item not in found)
        return found

    def repoint(self, producer: torch.fx.Node, edge: tuple) -> None:
        """FX replaces the observer of a shared input's producer by the first input's one."""
        annotation = producer.meta.get("quantization_annotation")
        if producer in self.observed and annotation is not None:
            annotation.output_qspec = SharedQuantizationSpec(edge)


def _flat_args(node: torch.fx.Node) -> Iterator[Any]:
    for arg in node.args:
        if isinstance(arg, (list, tuple)):
            yield from arg
        else:
            yield arg


def _shares_in_graph(first_input: torch.fx.Node, dtype: str | None) -> bool:
    """FX's ``_is_observer_in_same_graph``: a uint8 op reading a graph input keeps separate
    input and output observers instead of sharing one."""
    return not (dtype == "uint8" and first_input.op == "placeholder")
