"""The pt2e rule table's types: what :mod:`.rules` compiles and :mod:`.runtime` interprets.

Plain frozen dataclasses over plain values, so a table is also plain data (``to_data`` /
``Table.from_data``) that ``bespec compile --target pt2e`` writes as a Python literal. This module
imports nothing outside the standard library: the compiled standalone module inlines it.

Table format 2 adds the per-rule :class:`Policy` (spec_version 3 keys): when the rule quantizes,
whether its output is observed, how its chain links and what its other inputs get.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Version of the table layout the runtime reads (2: rules carry a ``policy``).
TABLE_FORMAT = 2


@dataclass(frozen=True)
class Policy:
    """How a rule places observers beyond FX's defaults (the defaults are FX's behaviour).

    * ``quantize``: ``always``; ``if_input_quantized`` (the first input's producer is quantized);
      ``if_all_inputs_quantized`` (every activation input's producer is).
    * ``output``: ``always`` observed; ``never``; ``if_consumer_quantized`` (not observed here,
      but the node counts as quantized for its consumers' ``quantize`` policy, and a consumer
      that quantizes its input observes the edge: "int8 in, fp32 out").
    * ``extra_inputs``: what the inputs of the chain's later ops that are not the chain link
      get (conv + add: the add's other input): ``float`` or ``quantized``.
    * ``chain_input``: ``first`` (each op reads the previous one as its first argument) or
      ``any`` argument.
    * ``input_shapes``: ``any``, or ``equal`` (the first op's activation inputs are tensors of one
      shape; a scalar or a broadcast leaves the node to other rules).
    * ``scalars``: ``keep``, or ``tensor`` (number arguments of the first op become constant
      tensors before annotation and are quantized like any input).
    * ``consumers``: ``any``, or ``quantizing`` (quantize only when some user of the last op
      is the first op of a quantizing rule: X86's flatten before a linear, not before the
      model's output), or (spec_version 8) ``quantizable`` (some user is the first op of any
      rule, a float one included: X86's test is the consumer's op type, so its flatten before
      a linear it leaves float is quantized).
    * ``bias_qspec``: ``float``, or (spec_version 4) ``derived`` / ``derived_narrow``: the first
      op's bias is quantized to int32 with scale = input scale x weight scale and zero point 0
      (per channel when the weight is), as integer kernels add it; ``derived`` uses int32's
      full range, ``derived_narrow`` drops its lowest value (symmetric, as TOSA's).
    * ``input_observer``: ``own``, or (spec_version 5) ``upstream``: when the first op's first
      activation input comes from an op whose output is not observed, that edge shares the
      observer of the nearest observed op up the chain of first arguments (through the ops
      no rule observes), as EnnQuantizer's conv and linear do; a graph input or nothing
      observed upstream: the input's own observer. A ``share`` rule with one input joins
      that op's group with its output instead, through an edge from it (its own input edge
      stays unobserved), as EnnQuantizer's view ops do. ``upstream_only``: the first input
      never gets an observer of its own: an observed producer's, else the upstream op's
      through an edge from it (the input edge stays float), else none (EnnQuantizer's
      softmax).
    * ``producers``: ``split`` (FX: a ``share`` rule takes over the output observers of the
      producers of its other inputs, splitting them from their own input groups), or
      (spec_version 5) ``join``: the producers keep their groups and torchao unites them all
      (what a hand-written quantizer's ``SharedQuantizationSpec`` on those edges does).
    * ``when``: ``()``, or (spec_version 7) argument conditions, ``(ATen argument name,
      value)`` pairs: the rule matches only where every op of its chain whose schema has the
      argument was called with that value (a default counts), and some op has it
      (EnnQuantizer fuses conv + hardtanh only when ``min_val == 0``).
    * ``annotation_stage``: ``0``, or (spec_version 8) the annotation pass of the rule: the
      runtime annotates its matches stage by stage, each stage in graph order, so a
      ``quantize`` condition or an ``upstream_only`` input sees only producers of earlier
      stages and earlier nodes of its own (LiteRT's per-op annotators, run in a fixed order).
      Matching is not staged by it: which rule claims which nodes is decided first.
    * ``claim_stage``: ``0``, or (spec_version 10) the claim pass of the rule: the runtime
      matches pass by pass, lowest first, each pass over the whole graph as before (longest
      chain first, then spec order), so a rule of an earlier pass claims nodes before a
      longer rule of a later one (X86InductorQuantizer annotates a per-type config before the
      global one: Linear + add before conv + BatchNorm + add).
    * ``qconfig``: ``first_op`` (FX: the rule is quantized with the QConfig of its first op,
      which that op's own entry decides) or (spec_version 11) ``own``: with the QConfig of
      the entry's own first usable dtype config (a static XNNPACK composed after a dynamic one
      quantizes conv + relu statically, a lone conv dynamically).
    """

    quantize: str = "always"
    output: str = "always"
    extra_inputs: str = "float"
    chain_input: str = "first"
    input_shapes: str = "any"
    scalars: str = "keep"
    consumers: str = "any"
    bias_qspec: str = "float"
    input_observer: str = "own"
    producers: str = "split"
    when: tuple[tuple[str, Any], ...] = ()
    annotation_stage: int = 0
    claim_stage: int = 0
    qconfig: str = "first_op"
    input_sharing: str = "spec"


#: Every policy key with its allowed values, the default first (the spec format's source too).
POLICY_VALUES: dict[str, tuple[str, ...]] = {
    "quantize": ("always", "if_input_quantized", "if_all_inputs_quantized"),
    "output": ("always", "never", "if_consumer_quantized"),
    "extra_inputs": ("float", "quantized"),
    "chain_input": ("first", "any"),
    "input_shapes": ("any", "equal"),
    "scalars": ("keep", "tensor"),
    "consumers": ("any", "quantizing", "quantizable"),
    "bias_qspec": ("float", "derived", "derived_narrow"),
    "input_observer": ("own", "upstream", "upstream_only"),
    "producers": ("split", "join"),
    "qconfig": ("first_op", "own"),
    "input_sharing": ("spec", "dtype", "qspec"),
}


#: The policy keys that are passes (whole numbers, default 0), not words.
_STAGES = ("annotation_stage", "claim_stage")


@dataclass(frozen=True)
class Rule:
    """One pattern entry as ATen: its chain and how each node was written, and what to observe.

    ``chain[i]`` lists the ATen overloads op ``i`` may be; ``where[i]`` says how it must have
    been written (module class or callable kinds; ``None``: any way); ``groups[i]`` numbers the
    spec op it came from. ``input``/``output``/``weight`` name specs of the table (``None``:
    float). A rule with a ``reason`` claims its nodes but leaves them float.
    """

    label: str
    chain: tuple[tuple[str, ...], ...]
    where: tuple[Any, ...]
    groups: tuple[int, ...]
    observation: str = "none"
    by_num_args: tuple[tuple[int, str], ...] = ()
    input: str | None = None
    output: str | None = None
    weight: str | None = None
    reason: str = ""
    policy: Policy = field(default_factory=Policy)

    def to_data(self) -> dict[str, Any]:
        """The rule as JSON-able plain data."""
        data = asdict(self)
        data["chain"] = [list(alts) for alts in self.chain]
        data["where"] = list(self.where)
        data["groups"] = list(self.groups)
        data["by_num_args"] = {str(n): obs for n, obs in self.by_num_args}
        data["policy"] = {
            k: v
            for k, v in asdict(self.policy).items()
            if k in POLICY_VALUES and v != POLICY_VALUES[k][0]
        }
        if self.policy.when:  # the policy keys that are not words: a mapping, a number
            data["policy"]["when"] = dict(self.policy.when)
        for stage in _STAGES:
            if getattr(self.policy, stage):
                data["policy"][stage] = getattr(self.policy, stage)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Rule:
        return cls(
            label=data["label"],
            chain=tuple(tuple(alts) for alts in data["chain"]),
            where=tuple(data["where"]),
            groups=tuple(data["groups"]),
            observation=data.get("observation", "none"),
            by_num_args=tuple((int(n), o) for n, o in (data.get("by_num_args") or {}).items()),
            input=data.get("input"),
            output=data.get("output"),
            weight=data.get("weight"),
            reason=data.get("reason", ""),
            policy=_policy(data.get("policy") or {}),
        )

    @property
    def key(self) -> tuple:
        """What makes two rules the same match: their chain, provenance and conditions."""
        return rule_key(self.chain, self.where, self.policy.when)


def _policy(data: dict[str, Any]) -> Policy:
    """A :class:`Policy` from its plain data (``when`` a mapping there, pairs here)."""
    when = tuple((data.get("when") or {}).items())
    return Policy(**{k: v for k, v in data.items() if k != "when"}, when=when)


def rule_key(chain: Sequence[Sequence[str]], where: Sequence[Any], when: Any = ()) -> tuple:
    """:attr:`Rule.key` of a chain, its provenance and its ``when`` conditions, before a rule
    is made of them: two entries of one chain under different conditions match apart (a
    float conv2d entry of one-channel-per-group weights beside the conv's own)."""
    return (tuple(tuple(alts) for alts in chain), repr(tuple(where)), repr(tuple(when)))


@dataclass(frozen=True)
class Table:
    """Specs (name -> plain spec data), rules (longest chain first, then spec order) and the
    spec of the graph inputs, if they are observed for their own sake."""

    specs: dict[str, dict[str, Any]]
    rules: tuple[Rule, ...]
    format: int = TABLE_FORMAT
    #: The spec every float graph input's output gets (spec_version 5 ``graph_inputs``).
    graph_inputs: str | None = None
    #: When an input reuses its producer's output observer (spec_version 5): ``dtype`` (FX)
    #: or ``qspec`` (torchao with a hand-written Quantizer); None means ``dtype``.
    input_sharing: str | None = None
    #: The labels of the graph passes run before annotation (spec_version 8
    #: ``transform_for_annotation``); the runtime is given the functions themselves.
    passes: tuple[str, ...] = ()

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": self.format,
            "specs": self.specs,
            "rules": [rule.to_data() for rule in self.rules],
        }
        if self.graph_inputs is not None:
            data["graph_inputs"] = self.graph_inputs
        if self.input_sharing not in (None, "dtype"):
            data["input_sharing"] = self.input_sharing
        if self.passes:
            data["transform_for_annotation"] = list(self.passes)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Table:
        if data.get("format") != TABLE_FORMAT:
            raise ValueError(
                f"rule table format {data.get('format')!r}, this runtime reads {TABLE_FORMAT}: "
                "recompile the spec"
            )
        rules = tuple(Rule.from_data(rule) for rule in data["rules"])
        return cls(
            specs=data["specs"],
            rules=rules,
            graph_inputs=data.get("graph_inputs"),
            input_sharing=data.get("input_sharing"),
            passes=tuple(data.get("transform_for_annotation") or ()),
        )
