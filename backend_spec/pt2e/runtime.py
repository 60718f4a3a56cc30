"""The pt2e runtime: a torchao Quantizer that interprets a rule table of plain data.

This module imports only ``torch`` and ``torchao`` (never bespec): ``bespec compile --target
pt2e`` copies its source verbatim into a standalone module next to the table, so the module a
user ships needs nothing else. That is also why it imports torch directly instead of through
``backend_spec._torch``.

The table (built by :mod:`backend_spec.pt2e.rules`, typed by :mod:`backend_spec.pt2e.table`)
is plain data::

    {"format": 2,
     "specs": {NAME: {"kind": "observed"|"fixed", "dtype": "uint8", ...,
                      "fake_quant": KIND (QAT tables only: the observer's fake-quantize)}},
     "graph_inputs": NAME (optional: the spec of every float graph input),
     "input_sharing": "qspec" (optional: an input reuses its producer's observer only when
                      it is the same spec, as torchao does; absent: when the dtypes agree),
     "rules": [{"label": str, "chain": [[aten target, ...], ...], "where": [...],
                "groups": [int, ...], "observation": "different"|"share"|"none",
                "by_num_args": {str(n): observation}, "input": NAME|None,
                "output": NAME|None, "weight": NAME|None, "reason": str,
                "policy": {"quantize": ..., "output": ..., ...}}]}

Rules are already sorted longest chain first, then in spec order. Matching mirrors FX's
``_find_matches``: nodes are visited in reverse, a chain is matched backwards from its last op,
each earlier op must be ``args[0]`` of the next one and have exactly one user, and a node is
claimed by the first rule that matches it (with ``claim_stage``, spec_version 10, one such
walk per stage, lowest first, on the nodes earlier stages left). Annotation then mirrors FX's
observer insertion (``prepare_fx``): input edges of the first node, the output of the last
one, reuse of an already observed producer (a ``SharedQuantizationSpec``), and input/output
sharing for ops such as ``cat`` and ``max_pool2d``. A rule's :class:`Policy` (spec_version 3)
changes that where a hand-written pt2e Quantizer places observers otherwise: outputs left
float, the other input of conv + add, quantizing only after quantized producers or before
quantized consumers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from backend_spec.pt2e.table import Policy, Rule, Table  # emit inlines table.py

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
DerivedQuantizationSpec = _quantizer.DerivedQuantizationSpec

#: ``bias_qspec`` -> the int32 range of a derived bias (``derived_narrow``: symmetric).
BIAS_RANGES = {"derived": -(2**31), "derived_narrow": -(2**31) + 1}

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
#: Ops whose ``weight`` FX never observes (its ``NON_QUANTIZABLE_WEIGHT_OPS``): a norm's affine
#: weight is a 1-D scale, on which a per-channel weight observer would even fail.
_FLOAT_WEIGHT_TARGETS = (
    "aten.layer_norm.default",
    "aten.group_norm.default",
    "aten.instance_norm.default",
)

#: How far ``input_observer: upstream`` walks back (a bound on a walk along a long chain).
_MAX_UPSTREAM = 256

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

    rule: Rule
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
    #: The functions of the table's ``transform_for_annotation`` (spec_version 8), in order:
    #: each takes the exported GraphModule and returns it. The table records their names only
    #: (it is plain data), so whoever builds the quantizer passes them.
    passes: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        super().__init__()
        typed = Table.from_data(self.table)
        if len(self.passes) != len(typed.passes) or not all(map(callable, self.passes)):
            raise ValueError(
                f"this table runs {len(typed.passes)} graph passes before annotating "
                f"({', '.join(typed.passes) or 'none'}); give exactly those functions as "
                f"passes=, not {len(self.passes)} objects"
            )
        self._specs = {name: make_spec(data) for name, data in typed.specs.items()}
        self._spec_data = typed.specs
        self._dtypes = {name: data["dtype"] for name, data in typed.specs.items()}
        self._dynamic = {name: bool(data.get("is_dynamic")) for name, data in typed.specs.items()}
        self.rules = typed.rules
        self.graph_inputs = typed.graph_inputs
        self.input_sharing = typed.input_sharing or "dtype"
        self._by_last: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for target in rule.chain[-1]:
                self._by_last.setdefault(target, []).append(rule)
        self._scalar_targets = {
            target
            for rule in self.rules
            if rule.policy.scalars == "tensor"
            for target in rule.chain[0]
        }
        self._order: dict[torch.fx.Node, int] = {}
        #: First ops of the rules that quantize (what ``consumers: quantizing`` looks for).
        self.quantizing_targets = {
            target
            for rule in self.rules
            if rule.input is not None and not rule.reason
            for target in rule.chain[0]
        }
        #: First ops of every rule, float ones included (``consumers: quantizable``).
        self.quantizable_targets = {target for rule in self.rules for target in rule.chain[0]}

    # --- torchao Quantizer API --------------------------------------------------------------

    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """The table's graph passes (``transform_for_annotation``, spec_version 8) in order,
        then ``scalars: tensor``: number arguments of those rules' first ops become
        constants (of the graph the passes produced)."""
        for graph_pass in self.passes:
            model = lazily(graph_pass, model)
        if self._scalar_targets:
            _scalars_to_tensors(model, self._scalar_targets)
        return model

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self.matches = self.find_matches(model.graph)
        _Annotator(self).run(model.graph, self.matches)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        """Nothing to validate: every annotation comes from the table."""

    # --- matching ---------------------------------------------------------------------------

    def find_matches(self, graph: torch.fx.Graph) -> list[Match]:
        """Longest-first, spec-order matches; each node claimed at most once (as FX). With
        ``claim_stage`` (spec_version 10) one such pass per stage, lowest first: a stage
        claims only nodes no earlier stage took. The matches are in forward order."""
        nodes = list(graph.nodes)
        self._order = {node: index for index, node in enumerate(nodes)}
        claimed: set[torch.fx.Node] = set()
        matches: list[Match] = []
        for stage in sorted({rule.policy.claim_stage for rule in self.rules}):
            for node in reversed(nodes):
                if node.op != "call_function" or node in claimed:
                    continue
                for rule in self._by_last.get(str(node.target), ()):
                    if rule.policy.claim_stage != stage:
                        continue
                    found = self.walk(rule, node, claimed)
                    if isinstance(found, list):
                        claimed.update(found)
                        matches.append(Match(rule, found))
                        break
        matches.sort(key=lambda match: self._order[match.nodes[-1]])
        return matches

    def why_not(self, rule: Rule, last: torch.fx.Node, claimed: set[torch.fx.Node]) -> str | None:
        """``None`` if ``rule`` matches backwards from ``last``, else the first reason why not."""
        found = self.walk(rule, last, claimed)
        return None if isinstance(found, list) else found

    def walk(
        self, rule: Rule, last: torch.fx.Node, claimed: set[torch.fx.Node]
    ) -> list[torch.fx.Node] | str:
        """The nodes of ``rule``'s chain ending at ``last`` (forward order), or why not."""
        found = self._walk_back(rule, last, len(rule.chain) - 1, claimed, None)
        if isinstance(found, str):
            return found
        found.reverse()
        if rule.policy.input_shapes == "equal" and not _equal_tensor_inputs(found[0]):
            return "its inputs are not tensors of one shape (input_shapes: equal)"
        unmet = _unmet_condition(found, rule.policy.when)
        if unmet:
            return unmet
        return found

    def _walk_back(
        self, rule: Rule, node: Any, index: int, claimed: set, successor_key: Any
    ) -> list[torch.fx.Node] | str:
        chain = rule.chain
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return f"op {index + 1} of the chain is not an operator call"
        if str(node.target) not in chain[index]:
            return f"op {index + 1} is {node.target}, the rule needs {' or '.join(chain[index])}"
        if node in claimed:
            return f"{node.name} already belongs to another match"
        problem = provenance_problem(node, rule.where[index])
        if problem:
            return f"{node.name}: {problem}"
        key = _innermost_key(node)
        if (
            index + 1 < len(chain)
            and rule.groups[index] == rule.groups[index + 1]
            and key != successor_key
        ):
            return f"{node.name} is not in the same module call as its successor"
        if index == 0:
            return [node]
        reason = "no input"
        for producer in self.producers(rule, node):
            if isinstance(producer, torch.fx.Node) and len(producer.users) != 1:
                reason = (
                    f"{producer.name} has {len(producer.users)} users; a chain needs exactly one"
                )
                continue
            found = self._walk_back(rule, producer, index - 1, claimed, key)
            if isinstance(found, list):
                return [node, *found]
            reason = found
        return reason

    def producers(self, rule: Rule, node: torch.fx.Node) -> list[Any]:
        """The arguments the chain may link through: the first (``chain_input: first``), or
        every tensor argument, earliest producer first (``any``: conv + add either way)."""
        if rule.policy.chain_input == "first":
            return [node.args[0] if node.args else None]
        candidates = [arg for arg in node.args if isinstance(arg, torch.fx.Node)]
        return sorted(candidates, key=lambda arg: self._order.get(arg, -1))

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
                yield Verdict(node.name, target, match.rule.label, _annotated_reason(match))
                continue
            rules = [rule for rule in self.rules if any(target in alts for alts in rule.chain)]
            if not rules:
                yield Verdict(node.name, target, None, "no rule of the spec has this ATen op")
                continue
            reasons = []
            for rule in rules:
                if target in rule.chain[-1]:
                    reason = self.why_not(rule, node, claimed - {node})
                else:
                    reason = "the op is not the last of this chain and no chain ends here"
                reasons.append(f"{rule.label}: {reason}")
            yield Verdict(node.name, target, None, "; ".join(reasons))

    # --- annotation helpers used by _Annotator -----------------------------------------------

    def spec(self, name: str | None) -> Any:
        return None if name is None else self._specs[name]

    def table_spec(self, name: str) -> dict[str, Any]:
        """The table's plain data of spec ``name``."""
        return self._spec_data[name]

    def dtype(self, name: str | None) -> str | None:
        return None if name is None or self._dynamic[name] else self._dtypes[name]


def _equal_tensor_inputs(node: torch.fx.Node) -> bool:
    """Whether every activation argument of ``node`` is a float tensor, all of one shape."""
    names = _argument_names(node)
    values = []
    for index, arg in enumerate(node.args):
        name = names[index] if index < len(names) else ""
        if name in _WEIGHT_ARGS or name in _SKIPPED_ARGS or name == "alpha":
            continue
        if not _is_float_tensor(arg):
            return False
        values.append(tuple(arg.meta["val"].shape))
    return len(set(values)) == 1


def argument_values(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults included (``when`` reads them)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    values: dict[str, Any] = {}
    for index, argument in enumerate(schema.arguments):
        if index < len(node.args):
            values[argument.name] = node.args[index]
        elif argument.name in node.kwargs:
            values[argument.name] = node.kwargs[argument.name]
        elif argument.has_default_value():
            values[argument.name] = argument.default_value
    return values


def _unmet_condition(nodes: list[torch.fx.Node], when: tuple) -> str | None:
    """Why the chain's arguments fail ``when`` (spec_version 7), or None: every op whose
    schema has a named argument must have been called with its value (or, version 8, a
    tensor argument of that size), and some op has it."""
    for name, wanted in when:
        found = [
            value
            for values in map(argument_values, nodes)
            for value in _condition_values(values, name)
        ]
        if not found:
            return f"no op of the chain has an argument {name} (when)"
        for value in found:
            if isinstance(value, bool) != isinstance(wanted, bool) or value != wanted:
                return f"its {name} is {value!r}, the rule needs {wanted!r} (when)"
    return None


def _condition_values(values: dict[str, Any], name: str) -> list[Any]:
    """The value a ``when`` condition tests in one node's arguments: the argument itself, or
    (spec_version 8, ``weight.shape.1``) a tensor argument's size along a dimension; none
    when the node has no such argument (or the tensor no such dimension)."""
    argument, _, dim = name.partition(".shape.")
    if argument not in values:
        return []
    if not dim:
        return [values[argument]]
    value = values[argument]
    fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    shape = getattr(fake, "shape", None)
    return [int(shape[int(dim)])] if shape is not None and int(dim) < len(shape) else []


def _scalars_to_tensors(model: torch.fx.GraphModule, targets: set[str]) -> None:
    """Number arguments that the schema types as Tensor (``x * 2.0``) become constant buffers,
    so they are observed and quantized like any other input (XNNPACKQuantizer's
    ``_convert_scalars_to_attrs``)."""
    count = 0
    for node in list(model.graph.nodes):
        if node.op != "call_function" or str(node.target) not in targets:
            continue
        if _is_integer_tensor(node):  # BatchNorm's num_batches_tracked += 1 (training mode)
            continue
        schema = getattr(node.target, "_schema", None)
        fake_mode = getattr(node.meta.get("val"), "fake_mode", None)
        if schema is None or fake_mode is None:
            continue
        args = list(node.args)
        for index, arg in enumerate(args):
            tensor_typed = index < len(schema.arguments) and str(
                schema.arguments[index].type
            ).startswith("Tensor")
            if not tensor_typed or isinstance(arg, bool) or not isinstance(arg, (int, float)):
                continue
            while hasattr(model, f"_tensor_constant_{count}"):
                count += 1
            name = f"_tensor_constant_{count}"  # the name XNNPACKQuantizer gives it
            value = torch.tensor(float(arg))
            model.register_buffer(name, value)
            with model.graph.inserting_before(node):
                constant = model.graph.create_node("get_attr", name, (), {})
            constant.meta["val"] = fake_mode.from_tensor(value, static_shapes=True)
            args[index] = constant
        node.args = tuple(args)
    model.recompile()


def _annotated_reason(match: Match) -> str:
    rule = match.rule
    if rule.reason:
        return f"claimed but left in float: {rule.reason}"
    return f"annotated ({rule.observation})"


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


def _is_integer_tensor(node: Any) -> bool:
    """Whether ``node`` computes a tensor that is not floating point (an integer op such as
    a training-mode BatchNorm's ``num_batches_tracked.add_(1)``, which nothing quantizes)."""
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and not value.is_floating_point()


def _is_float_tensor(node: Any) -> bool:
    if not isinstance(node, torch.fx.Node):
        return False
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.is_floating_point()


#: What torchao's implicit sharing compares between an input's qspec and its producer's
#: output qspec (``prepare._union_input_edge_with``): not the observer class.
_SHARING_ATTRIBUTES = (
    "dtype",
    "is_dynamic",
    "quant_min",
    "quant_max",
    "qscheme",
    "ch_axis",
    "scale",
    "zero_point",
)


def _same_attribute(a: Any, b: Any, attr: str) -> bool:
    """torchao's ``_has_same_attr``: equal where both have it, or neither has it."""
    if hasattr(a, attr) and hasattr(b, attr):
        return getattr(a, attr) == getattr(b, attr)
    return not hasattr(a, attr) and not hasattr(b, attr)


def _argument_names(node: torch.fx.Node) -> list[str]:
    schema = getattr(node.target, "_schema", None)
    return [argument.name for argument in schema.arguments] if schema is not None else []


class _Annotator:
    """Writes ``quantization_annotation`` on matched nodes, in forward order, like prepare_fx
    (stage by stage when rules have an ``annotation_stage``, as a quantizer's passes)."""

    def __init__(self, quantizer: TableQuantizer) -> None:
        self.quantizer = quantizer
        #: node -> dtype name of its quantized output (what FX would find already observed).
        self.observed: dict[torch.fx.Node, str] = {}
        #: node -> the spec its output's observer group was made with (``input_sharing:
        #: qspec`` compares it with a consumer's input spec, as torchao compares qspecs).
        self.output_spec: dict[torch.fx.Node, str] = {}
        #: nodes whose output counts as quantized for a consumer's ``quantize`` policy: the
        #: observed ones and those of ``output: if_consumer_quantized`` rules.
        self.quantized: set[torch.fx.Node] = set()
        #: outputs that continue their input's observer group because a ``quantize`` policy
        #: propagated it (XNNPACK's ``propagate_annotation``): a cat reading one joins that
        #: whole group, as torchao's implicit sharing does, instead of FX's split.
        self.propagated: set[torch.fx.Node] = set()

    def run(self, graph: torch.fx.Graph, matches: list[Match]) -> None:
        self.annotate_graph_inputs(graph)
        # ``annotation_stage`` (spec_version 8): stage by stage; the sort is stable, so each
        # stage keeps graph order (``matches`` is in forward order).
        for match in sorted(matches, key=lambda match: match.rule.policy.annotation_stage):
            for node in match.nodes:
                node.meta["quantization_annotation"] = QuantizationAnnotation(_annotated=True)
            self.annotate(match)

    def annotate_graph_inputs(self, graph: torch.fx.Graph) -> None:
        """``graph_inputs`` (spec_version 5): every float graph input's output is observed,
        whatever reads it; an entry quantizing a reader then shares that observer."""
        name = self.quantizer.graph_inputs
        if name is None:
            return
        for node in graph.nodes:
            if node.op == "placeholder" and _is_float_tensor(node):
                node.meta["quantization_annotation"] = QuantizationAnnotation(
                    output_qspec=self.quantizer.spec(name), _annotated=True
                )
                self.observed[node] = self.quantizer.dtype(name)
                self.output_spec[node] = name
                self.quantized.add(node)

    def observation(self, match: Match) -> str:
        rule, first = match.rule, match.nodes[0]
        if rule.by_num_args:
            count = sum(1 for arg in _flat_args(first) if _is_float_tensor(arg))
            return dict(rule.by_num_args).get(count, rule.observation)
        return rule.observation

    def wanted(self, policy: Policy, inputs: list[torch.fx.Node]) -> bool:
        """The rule's ``quantize`` policy on these activation inputs."""
        if policy.quantize == "if_input_quantized":
            return bool(inputs) and inputs[0] in self.quantized
        if policy.quantize == "if_all_inputs_quantized":
            return bool(inputs) and all(arg in self.quantized for arg in inputs)
        return True

    def consumed(self, policy: Policy, last: torch.fx.Node) -> bool:
        """The rule's ``consumers`` policy: ``quantizing`` needs a user that some rule
        quantizes (by its first op), ``quantizable`` one that some rule names, a float rule
        included (X86's test of the consumer's op type)."""
        if policy.consumers == "any":
            return True
        if policy.consumers == "quantizable":
            targets = self.quantizer.quantizable_targets
        else:
            targets = self.quantizer.quantizing_targets
        return any(str(user.target) in targets for user in last.users)

    def annotate(self, match: Match) -> None:
        rule = match.rule
        first = match.nodes[0]
        qspec_map = first.meta["quantization_annotation"].input_qspec_map
        if rule.reason or _is_integer_tensor(match.nodes[-1]) or rule.input is None:
            # Claimed, a weighted op's input and weight held in place with no qspec:
            # prepare_qat_pt2e's conv-bn rewrite reads a conv's map by position (input, weight,
            # bias), and a map that was empty or held only the weight failed (IndexError).
            names = _argument_names(first)
            if "weight" in names:
                for arg in self.activation_inputs(first):
                    qspec_map[arg] = None
                for index, arg in enumerate(first.args[: len(names)]):
                    if names[index] in _WEIGHT_ARGS and _is_float_tensor(arg):
                        qspec_map[arg] = None
            if not (rule.reason or _is_integer_tensor(match.nodes[-1])) and rule.weight:
                self.annotate_weights(first, rule, qspec_map)  # weight-only, as FX does
            return
        observation = self.observation(match)
        if observation == "none":
            return
        last = match.nodes[-1]
        inputs = self.activation_inputs(first)
        if not self.wanted(rule.policy, inputs) or not self.consumed(rule.policy, last):
            return
        in_dtype = self.quantizer.dtype(rule.input)
        if observation == "share" and not (inputs and _shares_in_graph(inputs[0], in_dtype)):
            observation = "different"
        if observation == "share" and len(inputs) == 1:
            borrowing = rule.policy.input_observer == "upstream_only"
            if borrowing and inputs[0] in self.observed:
                # The producer's observer, whatever its qspec (Core ML's and LiteRT's pools:
                # a SharedQuantizationSpec of the input node), not a spec of this rule's own
                # that torchao would unite with it only when the two are alike.
                self.annotate_borrowed_output(qspec_map, match, inputs[0])
                return
            upstream = self.upstream(rule.policy, inputs[0], inputs)
            if upstream is not None:
                # The output joins the nearest observed op's group through an edge from it
                # (not an argument: the op's own input edge stays unobserved), as
                # EnnQuantizer's view ops do.
                qspec_map[upstream] = SharedQuantizationSpec(upstream)
                self.annotate_output(last, rule, observation, (upstream, first))
                return
            if borrowing:  # nothing observed to borrow: the op stays float
                return
        root = None
        first_in = inputs[0] if inputs else None
        if observation == "share":
            # The group's root is an already observed input if there is one: torchao creates
            # a shared observer where the group first appears in graph order, so that place
            # must hold a real spec: the first input as FX does, unless it is float and another
            # is observed (that producer pointing at the float input's edge of cat asserts, B2);
            # then the earliest observed one: the same group, the same observer.
            observed = [arg for arg in inputs if self.observed.get(arg) == in_dtype]
            order = self.quantizer._order
            root = inputs[0]
            if observed and root not in observed:
                root = min(observed, key=lambda arg: order.get(arg, -1))
            inputs = [root, *(arg for arg in inputs if arg is not root)]
        for arg in inputs:
            if root is None and rule.policy.input_observer == "upstream_only" and arg is first_in:
                self.annotate_borrowed_input(qspec_map, rule.policy, arg, inputs, in_dtype)
            elif root is None:
                upstream = self.upstream(rule.policy, arg, inputs)
                if upstream is None:
                    self.annotate_input(qspec_map, arg, rule, in_dtype)
                else:
                    qspec_map[arg] = SharedQuantizationSpec(upstream)
            elif arg is root:
                # A real spec, as the hand-written quantizers give it: implicit sharing joins
                # it to an observed root's group; a SharedQuantizationSpec here could close a
                # cycle through the root's own input (cat of x and max_pool2d(x)).
                qspec_map[arg] = self.quantizer.spec(rule.input)
            else:
                qspec_map[arg] = SharedQuantizationSpec((root, first))
                if rule.policy.producers == "split":
                    self.repoint(arg, rule.input)
        # After the inputs: prepare_qat_pt2e's conv-bn rewrite reads the map in order (input,
        # weight, bias).
        self.annotate_weights(first, rule, qspec_map)
        if rule.policy.extra_inputs == "quantized":
            self.annotate_extra_inputs(match, in_dtype)
        self.annotate_output(last, rule, observation, (root, first))

    def upstream(self, policy: Policy, arg: Any, inputs: list) -> torch.fx.Node | None:
        """``input_observer: upstream``: for the first input, read from an op whose output is
        not observed, the nearest observed op up the chain of first arguments (``None``: a
        graph input or nothing observed that way)."""
        if policy.input_observer == "own" or arg is not inputs[0] or arg in self.observed:
            return None
        node = arg
        for _ in range(_MAX_UPSTREAM):
            if not isinstance(node, torch.fx.Node) or node.op != "call_function":
                return None
            if node in self.observed:
                return node
            first = node.args[0] if node.args else None
            node = first[0] if isinstance(first, (list, tuple)) and first else first
        return None

    def annotate_borrowed_input(
        self, qspec_map: dict, policy: Policy, arg: Any, inputs: list, dtype: str | None
    ) -> None:
        """``input_observer: upstream_only``: the producer's observer when it has one of this
        dtype, else the upstream op's through an edge from it (``arg``'s own edge stays
        float), else nothing."""
        if self.observed.get(arg) == dtype and dtype is not None:
            qspec_map[arg] = SharedQuantizationSpec(arg)
            return
        upstream = self.upstream(policy, arg, inputs)
        if upstream is not None:
            qspec_map[upstream] = SharedQuantizationSpec(upstream)

    def annotate_borrowed_output(self, qspec_map: dict, match: Match, producer) -> None:
        """``input_observer: upstream_only`` on an ``output_share_observer_with_input`` rule:
        input and output join the observed producer's group, with the producer's spec."""
        rule, first, last = match.rule, match.nodes[0], match.nodes[-1]
        qspec_map[producer] = SharedQuantizationSpec(producer)
        self.annotate_output(last, rule, "share", (producer, first))
        if last in self.output_spec:  # the group is the producer's, its dtype and spec too
            self.output_spec[last] = self.output_spec.get(producer, rule.input)
            self.observed[last] = self.observed[producer]

    def annotate_input(self, qspec_map: dict, arg: Any, rule: Rule, dtype: str | None) -> None:
        name = rule.input
        if dtype is not None and self.observed.get(arg) == dtype and self.reuses(arg, rule):
            qspec_map[arg] = SharedQuantizationSpec(arg)
        else:
            qspec_map[arg] = self.quantizer.spec(name)

    def reuses(self, arg: Any, rule: Rule) -> bool:
        """Whether an input of ``rule`` reuses the observer of ``arg``'s output (of its
        dtype): always under ``input_sharing: dtype`` (FX); under ``qspec`` only when the two
        specs agree on what torchao compares (:data:`_SHARING_ATTRIBUTES`: so an input after
        a fixed-qparams output is observed again). The rule's own ``input_sharing`` (version
        12) decides, else the spec's. A rule's fixed spec is its output's (FX's one activation
        observer), never an input's: such an input still reuses."""
        sharing = rule.policy.input_sharing
        if (self.quantizer.input_sharing if sharing == "spec" else sharing) != "qspec":
            return True
        name = rule.input
        if self.quantizer.table_spec(name).get("kind") == "fixed":
            return True
        ours, theirs = self.quantizer.spec(name), self.quantizer.spec(self.output_spec[arg])
        return all(_same_attribute(ours, theirs, attr) for attr in _SHARING_ATTRIBUTES)

    def annotate_extra_inputs(self, match: Match, dtype: str | None) -> None:
        """``extra_inputs: quantized``: the later ops' inputs other than the chain link."""
        for previous, node in zip(match.nodes, match.nodes[1:], strict=False):
            qspec_map = node.meta["quantization_annotation"].input_qspec_map
            for arg in self.activation_inputs(node):
                if arg is not previous:
                    self.annotate_input(qspec_map, arg, match.rule, dtype)

    def annotate_output(self, last, rule: Rule, observation: str, shared_edge: tuple) -> None:
        policy = rule.policy.output
        if policy == "if_consumer_quantized":
            self.quantized.add(last)
        out_dtype = self.quantizer.dtype(rule.output)
        if policy != "always" or rule.output is None:
            return
        if out_dtype is None:
            # A dynamic output: quantized at run time, it counts as quantized for consumers but
            # leaves nothing to reuse. It shares its input's observer (version 8), or on any
            # other entry has its own dynamic one (version 9: X86's QAT conv-bn chains).
            annotation = last.meta["quantization_annotation"]
            if observation == "share":
                annotation.output_qspec = SharedQuantizationSpec(shared_edge)
            else:
                annotation.output_qspec = self.quantizer.spec(rule.output)
            self.quantized.add(last)
            return
        annotation = last.meta["quantization_annotation"]
        if observation == "share":
            annotation.output_qspec = SharedQuantizationSpec(shared_edge)
            if rule.policy.quantize != "always" or rule.policy.producers == "join":
                self.propagated.add(last)
            self.output_spec[last] = rule.input
        else:
            annotation.output_qspec = self.quantizer.spec(rule.output)
            self.output_spec[last] = rule.output
        self.observed[last] = out_dtype
        self.quantized.add(last)

    def annotate_weights(self, node: torch.fx.Node, rule: Rule, qspec_map) -> None:
        names = _argument_names(node)
        weight = None
        if str(node.target) in _FLOAT_WEIGHT_TARGETS:
            return
        for index, arg in enumerate(node.args):
            name = names[index] if index < len(names) else ""
            if name in _WEIGHT_ARGS and _is_float_tensor(arg) and rule.weight:
                qspec_map[arg] = self.quantizer.spec(rule.weight)
                weight = arg
        if "bias" in names and rule.policy.bias_qspec in BIAS_RANGES and weight is not None:
            self.annotate_bias(node, names.index("bias"), weight, rule, qspec_map)

    def annotate_bias(self, node, position: int, weight, rule: Rule, qspec_map) -> None:
        """``bias_qspec: derived``: int32, its qparams derived from the input's and the weight's
        observers on this node (scale = input scale x weight scale, zero point 0)."""
        bias = node.args[position] if position < len(node.args) else None
        inputs = self.activation_inputs(node)
        if not _is_float_tensor(bias) or not inputs:
            return
        per_channel = "per_channel" in (self.quantizer.table_spec(rule.weight).get("qscheme") or "")
        qspec_map[bias] = DerivedQuantizationSpec(
            derived_from=[(inputs[0], node), (weight, node)],
            derive_qparams_fn=derive_bias_qparams,
            dtype=torch.int32,
            quant_min=BIAS_RANGES[rule.policy.bias_qspec],
            quant_max=2**31 - 1,
            qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
            ch_axis=0 if per_channel else None,
        )

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

    def repoint(self, producer: torch.fx.Node, name: str) -> None:
        """FX replaces the observer of a shared input's producer by the first input's one.

        The producer's output gets the sharing op's own input spec, not a
        ``SharedQuantizationSpec`` of the root edge: torchao's implicit sharing then puts it in
        the root's group (the edge into the sharing op is the same tensor, with the same spec),
        and no reference points forward in graph order (a producer earlier than the root made
        prepare assert) or around a cycle. Like FX, this splits the producer's output from its
        own input group; a ``propagated`` producer keeps its annotation, so the sharing group
        extends through it to its producers (torchao's semantics, what XNNPACKQuantizer gets).
        """
        annotation = producer.meta.get("quantization_annotation")
        if producer in self.observed and producer not in self.propagated and annotation:
            annotation.output_qspec = self.quantizer.spec(name)


def derive_bias_qparams(observers: list) -> tuple[torch.Tensor, torch.Tensor]:
    """A derived bias's qparams: the input's scale times the weight's, zero point 0."""
    input_scale, _ = observers[0].calculate_qparams()
    weight_scale, _ = observers[1].calculate_qparams()
    scale = (input_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(weight_scale, dtype=torch.int32)


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


def lazily(transform: Any, model: Any) -> Any:
    """``transform(model)`` (a graph pass) on a lazily recompiled view of ``model``: same
    graph, submodules and ``meta`` (GraphModules the pass makes itself stay as they are: one
    of QNN's passes exports a module, which lazy modules would disturb).

    A GraphModule recompiles after every pass that changed it (Python source for every node,
    then ``compile``). A ``transform_for_annotation`` pipeline runs many passes (QNN's 35),
    and on export's probe suite, a graph of about ten thousand nodes, those recompiles were
    more than half of QNN's export. torch's ``_LazyGraphModule`` defers them until the module
    is called or its code is read. The passes see the same graph: only when code is generated
    changes."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    if not isinstance(model, torch.fx.GraphModule):
        return transform(model)
    lazy = _LazyGraphModule.from_graphmodule(model)
    lazy.meta = model.meta
    return transform(lazy)
