"""Probe results -> a BackendConfig whose spec quantizer annotates as the probed one did.

Each probed unit (:mod:`.probe`) that the quantizer annotated becomes one pattern entry whose
``aten`` chain is the unit's ATen ops (so it matches however the model wrote them) and whose
dtype config describes the qspecs the quantizer used:

- the first op's activation input qspec -> ``input_dtype``; its weight qspec -> ``weight_dtype``;
- the last op's output qspec -> ``output_dtype`` (observed), ``scale_exact_match`` (fixed qparams)
  or ``output_share_observer_with_input`` (shared with the input);
- a unit annotated only when its producer was quantized -> ``quantize: if_input_quantized``;
- a chain whose inner outputs were left unannotated -> a fusion entry for the whole chain.

What the format cannot say (different input and output observers, derived or unusual
qspecs, a float output) is recorded as a :class:`Gap` naming the ATen op; the verifier then
shows whether it matters on real models. Nothing here decides whether to write the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from backend_spec._torch import BackendConfig, torch
from backend_spec.export.quantizer.probe import (
    CONV_PRE_CONTEXT,
    FAKE_QUANT_CLASSES,
    LINEAR_CHAINS,
    OVER_CONV,
    PRODUCER_NAMES,
    SHARING_CONTEXT,
    SHARING_POST_CONTEXT,
    THIN_CHAIN,
    functional_chain,
    functional_name,
    functional_tail,
)
from backend_spec.ir import Backend, DTypeConfig, DTypeMapping, Entry, FunctionRef, Origin
from backend_spec.ir.lift import key_of
from backend_spec.ir.lower import lower
from backend_spec.pt2e.table import POLICY_VALUES
from backend_spec.specfile.fields import DEFAULT_AVERAGING_CONSTANT, OBSERVER_IN_QAT
from backend_spec.specfile.models import MAX_ANNOTATION_STAGE

with __import__("backend_spec.quiet", fromlist=["quiet"]).quiet():
    from torch.ao.quantization.backend_config import ObservationType

#: pt2e dtype names -> the torch.ao dtype a spec writes (the pt2e table maps them back).
_SPEC_DTYPES = {
    "int8": torch.qint8,
    "uint8": torch.quint8,
    "int16": torch.int16,
    "uint16": torch.uint16,
    "int32": torch.qint32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
_FULL_RANGE = {
    torch.qint8: (-128, 127),
    torch.quint8: (0, 255),
    torch.qint32: (-(2**31), 2**31 - 1),
    torch.int16: (-(2**15), 2**15 - 1),
    torch.uint16: (0, 2**16 - 1),
}

#: Observer classes -> (version 2 ``observer`` value, per-channel).
_OBSERVERS = {
    "MinMaxObserver": ("minmax", False),
    "MovingAverageMinMaxObserver": ("moving_average_minmax", False),
    "HistogramObserver": ("histogram", False),
    "PerChannelMinMaxObserver": ("minmax", True),
    "MovingAveragePerChannelMinMaxObserver": ("moving_average_minmax", True),
    "PlaceholderObserver": ("placeholder", False),
}
#: Fake-quantize classes (:data:`.probe.FAKE_QUANT_CLASSES`) -> the ``fake_quant`` kind.
_FAKE_QUANTS = dict(
    zip(
        FAKE_QUANT_CLASSES,
        ("fake_quantize", "fused_moving_avg", "learnable", "learnable"),
        strict=True,
    )
)
#: The observer both FakeQuantize and FusedMovingAvgObsFakeQuantize wrap when not told.
_DEFAULT_FAKE_QUANT_OBSERVER = "MovingAverageMinMaxObserver"
_FLOAT_EPS = float(torch.finfo(torch.float32).eps)
_FLOAT = DTypeMapping(torch.float)
#: Where an inferred entry comes from (no spec line).
_INFERRED = Origin("?")


def _dtype_config(
    inp: DTypeMapping, out: DTypeMapping, weight: DTypeMapping, bias: Any, is_dynamic: Any = None
) -> DTypeConfig:
    mappings = (("input_dtype", inp), ("output_dtype", out), ("weight_dtype", weight))
    return DTypeConfig(mappings, bias, is_dynamic)


@dataclass
class Gap:
    """Something about one ATen op the format cannot say (what the report names)."""

    op: str
    what: str
    #: Whether no spec can quantize the op as the quantizer does, whatever else it says (an
    #: observer that converts itself): where the op is quantized, verification must differ.
    certain: bool = False


@dataclass
class Inferred:
    """The entries inferred, and what could not be expressed."""

    backend_config: BackendConfig
    entries: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)


def infer(
    probed: dict[str, Any],
    unit_names: dict[str, tuple[str, ...]],
    name: str,
    graph_inputs: Sequence[dict[str, Any] | None] = (),
    *,
    rewritten: bool = False,
    orders: list[list[Any]] | None = None,
    claim_first: bool = False,
    qat: bool = False,
) -> Inferred:
    """A BackendConfig from :func:`.probe.probe`'s results (``unit_names``: key -> op names;
    ``graph_inputs``: the output qspec the quantizer gave each float graph input;
    ``rewritten``: the probes were read on the graph a spec's ``transform_for_annotation``
    passes produce, so a unit whose op the passes replaced says nothing of its own: the ops
    they made are probed as units of their own; ``orders``: the order probes' results,
    :func:`.probe.orders`, placing ops in annotation stages; ``claim_first``: when the Linear
    chains outrank conv + add, they claim their nodes in a pass before the other entries
    (``claim_stage``, version 10), as X86 annotates a per-type config of Linear before the
    global one; ``qat``: the probes were read in the QAT flow, where a plain observer is one
    the quantizer keeps (``fake_quant: observer``, version 10). All are keyword-only: a list
    of orders passed in ``rewritten``'s place would be truthy and place nothing."""
    probed, unit_names = _producer_fusions(probed, unit_names)
    builder = _Builder(name, _common_activation(probed))
    builder.rewritten = rewritten
    builder.unit_keys = {key for key in unit_names if "@" not in key}
    builder.stages = annotation_stages(orders or [])
    builder.graph_inputs(list(graph_inputs))
    builder.upstream = _upstream_readers(probed)
    builder.observed_again = observed_again(probed)
    builder.with_a_scalar = _scalar_observations(probed)
    builder.dynamic_propagation = bool(_dynamic_propagation(probed))
    builder.outranking = _outranks_conv(probed)
    builder.claim_first = claim_first and builder.outranking
    builder.qat = qat
    fusions = []
    spellings: dict[str, list[str]] = {}
    for key, names in unit_names.items():
        if "@" in key:
            spellings.setdefault(key.split("@")[0], []).append(names[0])
    for key, names in unit_names.items():
        if "@" in key:
            continue
        if len(names) == 1:
            builder.single(key, names[0], probed, spellings.get(key, []))
        else:
            fusions.append((key, names))
    thin = _thin_convs_apart(probed)
    builder.thin_float = thin == []
    builder.inferred.gaps += _depthwise_gaps(probed)
    builder.fusion_keys = [key for key, _names in fusions]
    for key, names in fusions:
        spelled = _spelled(key, functional_tail(names), unit_names)
        called = _spelled(key, functional_chain(names), unit_names)
        if _first_op_apart(probed, names[0], unit_names) or (
            called is not None and _spelled_apart(probed, key, called)
        ):
            # The first op is annotated by how it is written: X86 and Arm leave a called
            # conv or linear float, a per-type config of its module (XNNPACK's
            # set_module_type) leaves the called one to the global config. Each spelling of
            # the first op gets entries of its own, the later ops written every way.
            builder.fusion(key, names, probed, spelled, exact=True)
            if called is not None:
                builder.fusion(called, unit_names[called], probed, None, exact=True)
        else:
            builder.fusion(key, names, probed, spelled)
    builder.claimed(unit_names)
    if thin is not None:
        builder.thin_twin(thin)
    builder.thin_chains(probed, fusions)
    return builder.result()


class _Builder:
    def __init__(self, name: str, common: dict[str, Any] | None) -> None:
        #: The activation qspec most used: what an input shared with its producer gets.
        self.common = common
        self.name = name
        self.configs: list[tuple[int, Entry, str]] = []
        self.inferred = Inferred(BackendConfig(name))
        self.seen_chains: set[str] = set()
        #: ATen op -> the behaviour of its own entry (for deciding whether a chain is a fusion).
        self.single_output: dict[str, Any] = {}
        #: First ops whose input shares the observer of the nearest observed op upstream.
        self.upstream: set[str] = set()
        #: Binary ops observed otherwise when one operand is a number: on their own (not
        #: shared with the input), or not at all.
        self.with_a_scalar: dict[str, Any] = {}
        #: The dtype config every float graph input is observed with (version 5), if any.
        self.graph_inputs_config: DTypeConfig | None = None
        #: ATen op -> its ``annotation_stage`` (version 8), when the order probes need one.
        self.stages: dict[str, int] = {}
        #: ATen ops whose inputs observe a producer's output again when it is observed
        #: otherwise (``input_sharing: qspec``, version 12: Core ML's add and mul).
        self.observed_again: set[str] = set()
        #: The probed fusion units (whose ATen chains may coincide: conv + ReLU6 and conv +
        #: Hardtanh are both conv2d -> hardtanh, told apart by their arguments).
        self.fusion_keys: list[str] = []
        #: Whether dynamic qspecs propagate through ops after a dynamic anchor (X86).
        self.dynamic_propagation = False
        #: Whether the Linear chains claim conv(x) + linear(y) before conv + add does.
        self.outranking = False
        #: Whether the Linear chains claim their nodes in a pass before the other entries
        #: (``claim_stage``, version 10).
        self.claim_first = False
        #: Whether the probes were read in the QAT flow (``prepare_qat_pt2e``).
        self.qat = False
        #: Ops a quantizer claims but leaves float, which a ``quantizable`` consumer test needs.
        self.float_ops: set[str] = set()
        #: Whether the probes were read after graph passes (version 8).
        self.rewritten = False
        #: The probed units' keys (an op the passes made is read off them only when no unit
        #: probes it).
        self.unit_keys: set[str] = set()

    def result(self) -> Inferred:
        """The entries, longer chains first (readable; the pt2e runtime sorts them anyway)."""
        by_pattern: dict[Any, Entry] = {}
        table: dict[Any, Entry] = {}  # pattern key -> entry, a later one in the first's place
        ordered = sorted(self.configs, key=lambda item: (-item[0], not item[1]))
        for _length, _first, config, label in ordered:
            chosen = self.named(config, label, by_pattern, table)
            if chosen is not None:
                by_pattern[chosen.pattern] = table[chosen.key] = chosen
        entries = _own_qconfigs(tuple(table.values()), self.name, self.qat)
        self.inferred.backend_config = lower(Backend(self.name, entries, self.graph_inputs_config))
        return self.inferred

    def named(
        self,
        config: Entry,
        label: str,
        by_pattern: dict[Any, Entry],
        table: dict[Any, Entry],
    ) -> Entry | None:
        """The entry of a unit outside the packaged table (:data:`.probe.EXTRA_UNITS`) under a
        name whose own trace is no other op, or that op's entry when it quantizes alike (then
        also matching this unit's op; ``None`` is returned); other entries as they are."""
        from backend_spec.export.quantizer.probe import EXTRA_UNITS

        candidates = next((c for key, c, *_ in EXTRA_UNITS if key == label), None)
        if candidates is None:
            return config
        known = by_pattern.get(config.pattern)
        merged = _merged(known, config) if known is not None else None
        if merged is not None:
            by_pattern[merged.pattern] = table[merged.key] = merged
            return None
        for name in candidates:
            pattern = _resolve(name)
            if pattern not in by_pattern and _traces_to(pattern) in (None, label):
                return _renamed(config, pattern)
        self.gap(label, "no op name writes it without another op the quantizer treats otherwise")
        return None

    def graph_inputs(self, qspecs: list[dict[str, Any] | None]) -> None:
        """``graph_inputs`` (version 5) when the quantizer observes every float graph input
        with one qspec of its own; not all alike is a gap. Some observed and some not is no
        construct of its own: the probes read each such observer as the input qspec of the op
        reading it (:func:`.probe.read_annotations`), and that op's entry says it."""
        observed = [q for q in qspecs if q is not None]
        if not observed or len(observed) != len(qspecs):
            return
        label = "graph inputs"
        kinds = {json.dumps(q, sort_keys=True) for q in observed}
        if len(kinds) != 1 or observed[0]["kind"] != "observed":
            self.gap(label, "the quantizer observes graph inputs not all alike")
            return
        mapping = self.mapping(label, "graph input", observed[0])
        self.graph_inputs_config = _dtype_config(mapping, mapping, DTypeMapping(), None)

    # --- units --------------------------------------------------------------------------------

    def single(self, key: str, name: str, probed: dict[str, Any], others: list[str]) -> None:
        """One entry for the op however it is written; or, when the quantizer annotates some
        spellings only, one entry per annotated spelling (matched by how it was written)."""
        spelled = {name: key, **{other: f"{key}@{other}" for other in others}}
        found = {n: _first_annotated(probed, k) for n, k in spelled.items()}
        annotated = [n for n, (context, _ops) in found.items() if context is not None]
        if not annotated:
            return
        contexts = {found[n][0] for n in annotated}
        # Spellings annotated alike share one entry; a per-spelling override (XNNPACK's
        # set_module_type(nn.Linear, ...) leaves F.linear with the global config) does not.
        qspecs = {_qspecs_of(found[n][1]) for n in annotated}
        any_spelling = len(annotated) == len(spelled) and len(contexts) == 1 and len(qspecs) == 1
        chosen_names = [name] if any_spelling else annotated
        call = None if any_spelling else _call_spelling(found)
        if call is not None:
            # A module-type override (XNNPACK's set_module_type(nn.Linear, None)): the other
            # config covers the op however else it is written, F.linear inside torch's own
            # modules too (MultiheadAttention's projections). The modules are matched first
            # by their spelling (a float entry for one left float), the call by its ATen op.
            modules = [n for n in spelled if n.startswith("nn.")]
            for module in modules:
                if found[module][0] is None:
                    self.float_spelling(key.split("@")[0], module)
            chosen_names = [n for n in modules if found[n][0] is not None] + [call]
        for chosen in chosen_names:
            context, ops = found[chosen]
            op = ops[0]
            if self.rewritten and op["target"] != key.split("@")[0]:
                # The passes replaced the op: its replacements' own units say them, and those
                # no unit probes (a softmax becomes amax, sub, exp, sum...) are read here.
                self.introduced(ops)
                continue
            if context != "alone" and _fused_with_producer(probed, spelled[chosen], context):
                if _float_after_producer(probed, op["target"]):
                    # A probed chain shows it float after another quantized producer: the
                    # fusion with the probe's producer (_producer_fusions) says it all.
                    continue
                # The producer's pattern took the op in (linear + relu): after any other
                # quantized producer the quantizer propagates the producer's qspec.
                shared = {"kind": "shared", "with": "producer:0"}
                op = {**op, "inputs": {"0": shared}, "output": shared}
            policy = {"quantize": _quantize_policy(probed, spelled[chosen], context)}
            if context in ("post", "pre_post"):  # annotated only before some consumers
                policy["consumers"] = self.consumers(probed, spelled[chosen], context)
            policy.update(_variant_policy(probed, key))
            if op["target"] in self.observed_again:
                policy["input_sharing"] = "qspec"
            if not any_spelling and self.stages.get(spelled[chosen]):
                # A spelling placed apart from its op (LiteRT's F.adaptive_avg_pool2d).
                policy["annotation_stage"] = self.stages[spelled[chosen]]
            if "gap" in policy:
                self.gap(key, policy.pop("gap"))
            first = call is not None and chosen != call  # a module before the call's entry
            either = any_spelling or chosen == call
            self.add([op["target"]], [chosen], op, op, policy, either, priority=first)

    def first_claim(self) -> dict[str, Any]:
        """The policy of a Linear chain that claims conv(x) + linear(y) before conv + add
        does: through any argument, and (``claim_first``) in the first claim pass, before
        longer chains such as conv + BatchNorm + add."""
        return {"chain_input": "any", **({"claim_stage": 0} if self.claim_first else {})}

    def float_spelling(self, target: str, name: str) -> None:
        """A float entry for ``name`` (a module spelling the quantizer leaves float), matched by
        its spelling before the entry of the op's other spellings."""
        floating = _dtype_config(_FLOAT, _FLOAT, DTypeMapping(), None)
        observation = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        label = f"{target}@{name}"
        if label not in self.seen_chains:
            self.seen_chains.add(label)
            self.entry(label, [target], [name], floating, observation, {}, False, priority=True)

    def consumers(self, probed: dict[str, Any], key: str, context: str) -> str:
        """``consumers`` of an op annotated only before a consumer: ``quantizing``; or
        ``quantizable`` (version 8) when that consumer is one the quantizer claims but leaves
        float (annotated without a qspec: X86 tests the consumer's op type, so its flatten
        before a Linear it leaves float is quantized). Such a consumer op gets a float entry
        (:meth:`claimed`), so that the spec names it."""
        post = (probed.get(context) or {}).get(key, {}).get("post", [])
        claimed = [o["target"] for o in post if o.get("annotated") and not annotated([o])]
        claimed += _float_consumers(probed, key)
        if not claimed:
            return "quantizing"
        self.float_ops.update(claimed)
        return "quantizable"

    def claimed(self, unit_names: dict[str, tuple[str, ...]]) -> None:
        """A float entry for each op a ``quantizable`` consumer test must find that no entry
        names yet (X86's Linear under ``set_module_type_qconfig(nn.Linear, None)``)."""
        floating = _dtype_config(_FLOAT, _FLOAT, DTypeMapping(), None)
        observation = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        named = {chain.split("@")[0] for chain in self.seen_chains}
        for target in sorted(self.float_ops - named):
            names = unit_names.get(target)
            if names and len(names) == 1:
                self.seen_chains.add(target)
                self.entry(target, [target], list(names), floating, observation, {}, True)

    def thin_twin(self, ops: list[dict[str, Any]]) -> None:
        """A conv2d entry, before the conv's own, matched only where the weight has one
        input channel per group (version 8 ``when: {weight.shape.1: 1}``), annotated as the
        ``#depthwise`` and ``#one_channel`` probes' ``ops`` are (float when there are none):
        dynamic XNNPACK's ``_do_annotate_conv`` skips depthwise convs and convs of
        one-channel inputs (its test, ``is_depthwise_conv``, reads the weight's dimension 1),
        and a static XNNPACK composed after it quantizes those statically."""
        target = _CONV2D
        taken = {key_of(_resolve_exact([n])) for n in _CONV2D_NAMES} & {
            c.key for _n, _p, c, _l in self.configs
        }
        names = [n for n in _CONV2D_NAMES if key_of(_resolve_exact([n])) not in taken][:1]
        if not names or f"{target}#thin" in self.seen_chains:
            return
        self.seen_chains.add(f"{target}#thin")
        policy = {"when": ((_THIN, 1),)}
        # Spelled exactly (a pattern key of its own beside the conv's entry), yet matched
        # through the ATen chain however the model wrote the conv.
        count = len(self.configs)
        if ops:
            self.add([target], names, ops[0], ops[-1], policy, False, True)
        else:
            floating = _dtype_config(_FLOAT, _FLOAT, DTypeMapping(), None)
            observation = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
            label = f"{target}#thin"
            self.entry(label, [target], names, floating, observation, policy, False, True)
        if len(self.configs) > count:  # else nothing the format can say (a gap says why)
            self.through_aten([target])

    def through_aten(self, targets: list[str]) -> None:
        """The entry added last, spelled exactly (a pattern key of its own), matched through
        its ATen chain however the model wrote it."""
        length, priority, config, label = self.configs[-1]
        aten = (tuple(tuple(_alternatives(t)) for t in targets),)
        self.configs[-1] = (length, priority, replace(config, aten=aten), label)

    def thin_chains(self, probed: dict[str, Any], fusions: list[tuple[str, Any]]) -> None:
        """A twin of each conv2d chain, before it, matched only where the conv has one input
        channel per group (``when: {weight.shape.1: 1}``), when the chain's ``#thin`` probe
        is fused otherwise than the chain: a static XNNPACK composed after a dynamic one
        fuses conv + ReLU6 there, where the dynamic part left the conv, while it quantizes a
        wider conv dynamically and only the ReLU6 statically."""
        alone = probed.get("alone") or {}
        taken = {c.key for _n, _p, c, _l in self.configs}
        for key, names in fusions:
            variant = alone.get(f"{key}#{THIN_CHAIN}", {}).get("ops", [])
            _context, ops = _first_annotated(probed, key)
            if len(variant) < 2 or not annotated(variant) or not _one_pattern(variant):
                continue
            if _qspecs(variant) == _qspecs(ops):
                continue
            folded = len(names) > len(variant)  # PTQ folds the BatchNorm into the conv
            kept = [n for n in names if "BatchNorm" not in n] if folded else names
            spellings = (tuple(kept), functional_chain(tuple(kept)), functional_tail(tuple(kept)))
            free = [s for s in spellings if key_of(_resolve_exact(list(s))) not in taken]
            targets = [o["target"] for o in variant]
            if len(kept) != len(variant) or not free:
                self.gap(">".join(targets), "its thin-conv twin has no spelling of its own left")
                continue
            policy: dict[str, Any] = {"when": ((_THIN, 1),)}
            if any(_extra_inputs(o) for o in variant[1:]):
                policy.update(extra_inputs="quantized", chain_input="any")
            count = len(self.configs)
            self.add(targets, list(free[0]), variant[0], variant[-1], policy, False, True)
            if len(self.configs) > count:
                taken.add(self.configs[-1][2].key)
                self.through_aten(targets)

    def introduced(self, ops: list[dict[str, Any]]) -> None:
        """An entry, named by its ATen op, for each annotated op of a unit that the graph
        passes made and that no unit probes by itself (version 8)."""
        for op in ops:
            target = op["target"]
            if target not in self.unit_keys and annotated([op]):
                self.add([target], [target], op, op, {})

    def fusion(
        self,
        key: str,
        names: tuple[str, ...],
        probed: dict[str, Any],
        spelled: str | None,
        exact: bool = False,
    ) -> None:
        """One entry for the chain; spelled with its modules (matched only as modules) when
        the quantizer annotates the chain written with functions (``spelled``) otherwise, or
        spelled as ``names`` are when ``exact``."""
        linear_chain = key in _LINEAR_CHAINS
        if linear_chain and not self.outranking:
            return
        context, ops = _first_annotated(probed, key)
        if context is None:
            if "@" not in key or exact:  # else a spelling left float: single-op entries say it
                self.float_chain(key, names, probed, claimed=linear_chain, exact=exact)
            return
        if len(ops) < 2:
            return
        if not _one_pattern(ops):  # each op keeps its own qspecs: the single-op entries say it
            return
        thin = _thin_variant(probed, key)
        if _first_op_only(probed, ops) and (self.thin_float or (thin and thin != _qspecs(ops))):
            # The conv alone, annotated as a lone conv (dynamic XNNPACK): its own entry says
            # it, with the twin that leaves one-channel-per-group convs float (or to a static
            # quantizer composed after it, which the chain's thin probe shows).
            return
        targets = [o["target"] for o in ops]
        kept = [n for n in names if "BatchNorm" not in n] if len(names) > len(ops) else list(names)
        if len(kept) != len(ops):
            return
        policy = {"quantize": _quantize_policy(probed, key, context)}
        if context in ("post", "pre_post"):
            policy["consumers"] = "quantizing"
        if targets[0] in self.observed_again:  # its first op's annotator reads inputs so
            policy["input_sharing"] = "qspec"
        if any(_extra_inputs(o) for o in ops[1:]):
            policy.update(extra_inputs="quantized", chain_input="any")
        if linear_chain:  # it claims conv(x) + linear(y) too, before conv + add
            policy.update(self.first_claim())
        # Where a later op reads more than the chain (the add of conv-bn-add): a chain longer
        # than torch's forward pattern takes is written in the complex format (:func:`_nested`).
        extras = tuple(i for i, o in enumerate(ops) if i and _extra_inputs(o))
        when, twin = self.conditions(key, targets, probed)
        if when:
            policy["when"] = when
        if twin:
            # Another chain of these ATen ops is fused otherwise: this one is its twin for
            # the arguments it meets, spelled as probed and tried first, matched through its
            # ATen chain however a model writes it (F.hardtanh(x, 0.0, 6.0) as nn.ReLU6).
            count = len(self.configs)
            self.add(targets, kept, ops[0], ops[-1], policy, False, True, extras)
            if len(self.configs) > count:
                self.through_aten(targets)
            return
        same_tails = (
            spelled is None
            or _without_args(_first_annotated(probed, spelled)) == _without_args((context, ops))
            # The spelled probe's arguments fail the conditions (F.hardtanh's defaults beside
            # nn.ReLU6): the difference is theirs, not the spelling's.
            or (bool(when) and not _meets(_alone_ops(probed, spelled), dict(when)))
        )
        if exact:
            # The first op matched as it is written here: each spelling of the others (F.relu,
            # torch.relu, x.relu(), nn.ReLU) fuses alike, unless the chain's functional-tail
            # probe showed the later ops' spelling matters too (then they are modules).
            tails = _tail_spellings(kept[1:]) if "@" in key or same_tails else [kept[1:]]
            for tail in tails:
                chain = [kept[0], *tail]
                self.add(targets, chain, ops[0], ops[-1], dict(policy), False, linear_chain, extras)
            return
        self.add(targets, kept, ops[0], ops[-1], policy, same_tails, linear_chain, extras)

    def conditions(
        self, key: str, targets: list[str], probed: dict[str, Any]
    ) -> tuple[tuple, bool]:
        """``when`` (version 7) of a fused chain whose ATen ops another probed chain shares
        without being fused (EnnQuantizer's conv + hardtanh only when ``min_val == 0``) or
        fused with other qspecs, where this chain's arguments are not the ops' defaults (Core
        ML observes conv + hardtanh's output affine only as a ReLU6 clamp): the arguments on
        which the fused probe differs from the others, with its values (every differing
        argument: two probes cannot tell which one the quantizer reads). And whether one of
        those others is fused: this chain is then a twin of its entry."""
        fused = _alone_ops(probed, key)
        special = not _at_defaults(fused)
        found: dict[str, Any] = {}
        twin = False
        for other in self.fusion_keys:
            ops = _alone_ops(probed, other)
            if other == key or [o["target"] for o in ops] != targets:
                continue
            if _fused(probed, other) and not (special and _qspecs(ops) != _qspecs(fused)):
                # Fused alike, or otherwise only where this chain's arguments are an op's
                # defaults (Core ML's conv + hardtanh observes an affine output only as a
                # ReLU6 clamp, min_val 0 and max_val 6: the other chain is the general case).
                continue
            twin = twin or _fused(probed, other)
            for mine, theirs in zip(fused, ops, strict=True):
                for name, value in (mine.get("args") or {}).items():
                    if (theirs.get("args") or {}).get(name, value) != value:
                        if found.get(name, value) != value:
                            self.gap(">".join(targets), f"its ops disagree on {name}")
                            return (), False
                        found[name] = value
        return tuple(found.items()), twin and bool(found)

    def float_chain(
        self,
        key: str,
        names: tuple[str, ...],
        probed: dict[str, Any],
        claimed: bool = False,
        exact: bool = False,
    ) -> None:
        """A chain left float although its first op alone is quantized (dynamic XNNPACK skips a
        conv whose only user is a relu): a float entry for the chain, which claims its ops
        (longest chain first) so that the first op's own entry does not quantize them. With
        ``claimed`` (a Linear chain that outranks conv + add), a chain the quantizer marks
        annotated without a qspec (X86 under ``set_module_type_qconfig(nn.Linear, None)``):
        its float entry comes before conv + add and links through any argument. With
        ``exact``, the chain as its first op is written here (``F.conv2d`` under a dynamic
        global config, its module under a static per-type one), each spelling of the rest."""
        every = probed.get("alone") or {}
        ops = every.get(key, {}).get("ops", [])
        if len(ops) < 2 or len(ops) != len(names):
            return
        spelled = f"{ops[0]['target']}@{names[0]}"
        first = every.get(spelled if exact and spelled in every else ops[0]["target"], {})
        if claimed and not all(o.get("annotated") for o in ops):
            return
        if not claimed and not annotated(first.get("ops", [])):
            return
        targets = [o["target"] for o in ops]
        floating = _dtype_config(_FLOAT, _FLOAT, DTypeMapping(), None)
        observation = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        policy = self.first_claim() if claimed else {}
        if exact:
            for tail in _tail_spellings(list(names[1:])):
                chain = [names[0], *tail]
                label = f"{'>'.join(targets)}@{'>'.join(chain)}"
                if label not in self.seen_chains:
                    self.seen_chains.add(label)
                    self.entry(label, targets, chain, floating, observation, policy, False, claimed)
            return
        chain_key = ">".join(targets)
        if chain_key in self.seen_chains:
            return
        self.seen_chains.add(chain_key)
        self.entry(chain_key, targets, list(names), floating, observation, policy, True, claimed)

    # --- one entry ----------------------------------------------------------------------------

    def add(
        self,
        targets: list[str],
        names: list[str],
        first: dict[str, Any],
        last: dict[str, Any],
        policy: dict[str, str],
        any_spelling: bool = True,
        priority: bool = False,
        extras: tuple[int, ...] = (),
    ) -> None:
        """The entry of a unit (``extras``: the chain ops that read another input too)."""
        chain_key = ">".join(targets) + ("" if any_spelling else f"@{'>'.join(names)}")
        if chain_key in self.seen_chains:
            return
        self.seen_chains.add(chain_key)
        label = chain_key
        act_position = next((p for p, kind in first["kinds"].items() if kind == "act"), None)
        act = first["inputs"].get(act_position) if act_position is not None else None
        weight_position = first.get("weight", "1")
        weight = _param_qspec(first, weight_position)
        bias = _param_qspec(first, "2") if weight_position == "1" else None
        output = _fixed_observer(last["output"])
        observation = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        producer = {"kind": "shared", "with": f"producer:{act_position}"}
        if act is None and output == producer and len(targets) == 1:
            # An output sharing its producer's observer and no input qspec (LiteRT's max_pool2d,
            # whose output annotation replaces the one of its input): torchao puts the input
            # edge in that group as well, as if the input shared it too.
            first = {**first, "inputs": {**first["inputs"], act_position: producer}}
            act = producer
        if act is not None and act.get("kind") == "shared" and self.common is not None:
            act = self.common  # the producer's own qspec, as the spec's runtime reuses it
        if act is None and output is None:
            if weight is not None and weight.get("kind") == "observed":
                # Weight-only: float in and out, the weight quantized (FX's weight-only).
                only = _dtype_config(
                    _FLOAT, _FLOAT, self.mapping(label, "weight", weight), torch.float
                )
                self.entry(label, targets, names, only, observation, policy, any_spelling, priority)
            return
        borrows = (act is None or act.get("kind") == "shared") and _borrows_input(targets, output)
        if borrows:  # the input only ever shares another op's observer: softmax
            act = output
        elif act is None or act.get("kind") == "shared":
            self.gap(label, "its activation input is not quantized with a qspec of its own")
            return
        input_dtype = self.mapping(label, "input", act)
        output_dtype = input_dtype
        if output is None and act.get("is_dynamic"):
            output_dtype = _FLOAT  # dynamic: quantized at run time, the output float
            if self.dynamic_propagation:  # ... and quantized for the ops it propagates to
                policy["output"] = "if_consumer_quantized"
        elif output is None:
            # "int8 in, fp32 out": observed only where a consumer quantizes it (X86's anchors).
            policy["output"] = "if_consumer_quantized"
        elif output.get("kind") == "shared":
            if output["with"] not in (f"input:{act_position}", f"producer:{act_position}"):
                self.gap(label, f"its output shares the qspec of {output['with']}")
            observation = ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
        elif output.get("kind") == "fixed":
            # A QConfig has one activation observer: the fixed one, for the input too (an
            # input read from a quantized producer keeps the producer's qparams in pt2e).
            output_dtype = input_dtype = self.mapping(label, "output", output)
        elif _own_output(act, output):
            # Another qscheme or observer of the same dtype (Core ML's affine relu outputs
            # after a symmetric input): the output mapping's own options (version 9).
            output_dtype = self.mapping(label, "output", output)
        elif _comparable(output) != _comparable(act):
            self.gap(label, "its output qspec differs from its input's")
        for position, other in first["inputs"].items():
            if position in (act_position, weight_position, "1", "2") or other is None:
                continue
            if other.get("kind") == "observed" and _comparable(other) != _comparable(act):
                self.gap(label, f"input {position} has another qspec than input {act_position}")
        if weight is not None and bias is not None:
            policy["bias_qspec"] = self.bias(label, bias, act_position)
        borrowed = _shares_producer(first, act_position, observation)
        if borrows or (borrowed and policy.get("quantize") == "if_input_quantized"):
            policy["input_observer"] = "upstream_only"
        elif len(targets) == 1 and targets[0] in self.upstream:
            policy["input_observer"] = "upstream"
        if (
            observation == ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
            and policy.get("quantize", "always") == "always"
        ):
            # The quantizer's SharedQuantizationSpec edges: torchao unites the producers'
            # groups with this one (FX's split applies to the spec's own runtime only).
            policy["producers"] = "join"
        dtype_config = _dtype_config(
            input_dtype,
            output_dtype,
            DTypeMapping() if weight is None else self.mapping(label, "weight", weight),
            None if weight is None else torch.float,
            bool(act.get("is_dynamic")) or None,
        )
        self.entry(
            label, targets, names, dtype_config, observation, policy, any_spelling, priority, extras
        )

    def entry(
        self,
        label: str,
        targets: list[str],
        names: list[str],
        dtype_config: DTypeConfig,
        observation: Any,
        policy: dict[str, str],
        any_spelling: bool,
        priority: bool = False,
        extras: tuple[int, ...] = (),
    ) -> None:
        """Add the pattern entry (matched through its ATen chain unless spelled exactly);
        ``priority``: before the other entries of its length (the pt2e runtime keeps spec order
        among chains of one length); ``extras``: the ops reading another input too, a
        ``MatchAllNode`` each when the chain is too long for a forward pattern."""
        pattern = names[0] if len(names) == 1 else tuple(names)
        resolved = _resolve(pattern) if any_spelling else _resolve_exact(names)
        values = {
            "pattern": resolved,
            "observation_type": observation,
            "dtype_configs": (dtype_config,),
            **_reference_modules(resolved),
        }
        if isinstance(resolved, tuple) and len(resolved) > _FORWARD_OPS:
            nested = _nested(resolved, extras)
            values = {
                "pattern_complex_format": nested,
                "observation_type": observation,
                "dtype_configs": (dtype_config,),
                **_reference_modules(resolved),
                **_torch_getters(nested),
            }
            resolved = None
        scalar = self.with_a_scalar.get(targets[0]) if len(targets) == 1 else None
        if scalar is not None and scalar != observation:
            # x * 0.5 observed on its own or left float, x * y as the entry says: FX's
            # observation by tensor count.
            values["num_tensor_args_to_observation_type"] = ((1, scalar), (2, observation))
        aten = (tuple(tuple(_alternatives(t)) for t in targets),) if any_spelling else ()
        stage = self.stages.get(targets[0], 0)
        if stage and "annotation_stage" not in policy:  # the chain's first op's (conv's)
            policy = {**policy, "annotation_stage": stage}
        if self.claim_first and "claim_stage" not in policy:  # after the Linear chains
            policy = {**policy, "claim_stage": 1}
        chosen = tuple((k, v) for k, v in policy.items() if v != _DEFAULTS.get(k))
        key = key_of(resolved, values.get("pattern_complex_format"))
        config = Entry(key, _INFERRED, Entry.ordered(values), aten, chosen)
        self.configs.append((len(targets), priority, config, label))
        self.inferred.entries.append(label)

    def bias(self, label: str, qspec: dict[str, Any], act_position: str | None) -> str:
        """The ``bias_qspec`` of a quantized bias: ``derived`` when it is int32 derived from
        this node's activation input and weight (the spec quantizer derives scale = input
        scale x weight scale, which verification checks); anything else is a gap."""
        derived_from = [f"input:{act_position}", "input:1"]
        ranges = {-(2**31): "derived", -(2**31) + 1: "derived_narrow"}
        if (
            qspec["kind"] == "derived"
            and qspec["dtype"] == "int32"
            and qspec["from"] == derived_from
            and qspec["quant_max"] == 2**31 - 1
            and qspec["quant_min"] in ranges
        ):
            return ranges[qspec["quant_min"]]
        what = f"its bias is quantized ({qspec['kind']} qspec)"
        if qspec["kind"] == "derived":
            span = f"{qspec['dtype']} [{qspec['quant_min']}, {qspec['quant_max']}]"
            what = (
                f"its bias is quantized (derived qspec, {span} from {qspec['from']}; the format "
                "says int32 from its input and weight, full or narrow range)"
            )
        self.gap(label, what)
        return "float"

    def mapping(self, label: str, role: str, qspec: dict[str, Any]) -> DTypeMapping:
        """The constrained dtype (with version 2 observer options) of a qspec."""
        dtype = _SPEC_DTYPES.get(qspec["dtype"])
        if dtype is None:
            self.gap(label, f"its {role} dtype {qspec['dtype']} has no spec dtype")
            return _FLOAT
        if dtype in (torch.float16, torch.bfloat16):
            return DTypeMapping(dtype)
        options: dict[str, Any] = {}
        lo, hi = _FULL_RANGE[dtype]
        outside = _outside_range(qspec, lo, hi)
        if outside:
            # nncf's asymmetric weights say int8 with uint8's range [0, 255]: no spec dtype
            # has it, and bounds outside the dtype would make the spec invalid (BS212).
            self.gap(label, f"its {role} qspec says {qspec['dtype']} with {outside}")
        else:
            if qspec.get("quant_min") is not None and qspec["quant_min"] != lo:
                options["quant_min_lower_bound"] = qspec["quant_min"]
            if qspec.get("quant_max") is not None and qspec["quant_max"] != hi:
                options["quant_max_upper_bound"] = qspec["quant_max"]
        qscheme = qspec.get("qscheme") or ""
        options["qscheme"] = "symmetric" if "symmetric" in qscheme else "affine"
        if qspec["kind"] == "fixed":
            options["scale_exact_match"] = qspec["scale"]
            options["zero_point_exact_match"] = qspec["zero_point"]
            return DTypeMapping.of(dtype, options)
        if qspec["kind"] != "observed":
            self.gap(label, f"its {role} qspec is {qspec['kind']}")
            return DTypeMapping.of(dtype, options)
        kwargs = dict(qspec.get("kwargs") or {})
        observer_class = qspec["observer"]
        fake_quant = _FAKE_QUANTS.get(observer_class)
        if fake_quant is not None:
            # A fake-quantize: its kind, and the observer it wraps (with that one's arguments);
            # given to prepare_pt2e it fake-quantizes in PTQ too (version 6).
            options["fake_quant"] = fake_quant
            options["ptq_fake_quant"] = True
            inner = kwargs.pop("observer", None)
            observer_class = _DEFAULT_FAKE_QUANT_OBSERVER
            if isinstance(inner, dict):
                observer_class = inner.get("class", observer_class)
                kwargs = {**(inner.get("kwargs") or {}), **kwargs}
        # torchao's prepare passes the qspec's ch_axis only to a class named "PerChannel...": a
        # fake-quantize's observer keeps its own axis (0) unless its arguments set one.
        axis = kwargs.get("ch_axis", 0 if fake_quant is not None else qspec.get("ch_axis"))
        eps = kwargs.pop("eps", None)
        # Any eps but the observers' default, smaller ones too (OpenVINO's 1e-16).
        if eps is not None and float(eps) != _FLOAT_EPS:
            options["scale_min_lower_bound"] = float(eps)
        constant = kwargs.pop("averaging_constant", DEFAULT_AVERAGING_CONSTANT)
        if (
            float(constant) != DEFAULT_AVERAGING_CONSTANT
        ):  # a dynamic QAT fake-quantize's 1 (version 9)
            options["averaging_constant"] = float(constant)
        if _uncustomized_qrange(qspec, kwargs, dtype):
            options["customized_qrange"] = False
        for key in ("dtype", "qscheme", "quant_min", "quant_max", "ch_axis", "is_dynamic"):
            kwargs.pop(key, None)
        observer, per_channel = _OBSERVERS.get(observer_class, (None, False))
        if observer is None:
            what = _unknown_observer(role, observer_class, kwargs, qspec)
            self.gap(label, what, certain=bool(qspec.get("converts")))
        else:
            options["observer"] = observer
            if kwargs:
                self.gap(
                    label, f"its {role} observer takes {sorted(kwargs)}, which no spec key sets"
                )
        if per_channel or "per_channel" in qscheme:
            options["granularity"] = "per_channel"
            options["ch_axis"] = int(axis or 0)
        if self.qat and fake_quant is None and observer not in (None, "placeholder"):
            # A plain observer in the QAT flow (EmbeddingQuantizer's weight beside a QAT
            # config): observed, not fake-quantized (version 10).
            options["fake_quant"] = OBSERVER_IN_QAT
        return DTypeMapping.of(dtype, options)

    def gap(self, op: str, what: str, certain: bool = False) -> None:
        self.inferred.gaps.append(Gap(op, what, certain))


def _outside_range(qspec: dict[str, Any], lo: int, hi: int) -> str:
    """The qspec's quant range, in words, when it leaves its dtype's ``[lo, hi]``; "" if not."""
    low, high = qspec.get("quant_min"), qspec.get("quant_max")
    if (low is None or low >= lo) and (high is None or high <= hi):
        return ""
    return f"the range [{low}, {high}], outside the dtype's [{lo}, {hi}]"


def _unknown_observer(role: str, name: str, kwargs: dict[str, Any], qspec: dict[str, Any]) -> str:
    """Why an observer class that no spec value names cannot be stated: its arguments, and
    whether it converts itself (its own ``convert``: no quantize/dequantize nodes at all, so
    no spec observer could give the same converted graph, whatever its qparams)."""
    built = f" (built with {', '.join(sorted(kwargs))})" if kwargs else ""
    what = f"its {role} observer {name}{built} has no spec value"
    if qspec.get("converts"):
        what += (
            f": {name}.convert replaces the observed tensor itself at convert_pt2e instead of "
            "quantize/dequantize nodes (a module of its own), which no spec observer does"
        )
    return what


def rewrite_gaps(rewritten: dict[str, tuple[int, int]]) -> list[Gap]:
    """The ops a quantizer's ``transform_for_annotation`` decomposes or introduces: a spec's
    quantizer annotates the graph as exported, so it cannot place observers on ops that only
    exist after such a rewrite (verification shows whether that matters)."""
    gaps = []
    for op, (before, after) in rewritten.items():
        change = "removes" if after < before else "introduces"
        what = (
            f"the quantizer's transform_for_annotation {change} {abs(before - after)} of its "
            f"nodes ({before} -> {after}): a spec annotates the graph as exported"
        )
        gaps.append(Gap(op, what))
    return gaps


_CONV2D = "aten.conv2d.default"
#: The names a conv2d entry may be written with (the twin takes the one the conv's is not).
_CONV2D_NAMES = ("nn.Conv2d", "F.conv2d")
#: The ``when`` key of a weight's input channels per group (version 8).
_THIN = "weight.shape.1"


def _thin_convs_apart(probed: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The ops of conv2d's one-channel-per-group variants (:data:`.probe.CONV_VARIANTS`)
    when both are annotated alike and otherwise than a lone conv2d, which is quantized: ``[]``
    when both are left float (dynamic XNNPACK), their ops when both are quantized alike
    (a static XNNPACK composed after it); ``None`` otherwise."""
    alone = probed.get("alone") or {}
    variants = [alone.get(f"{_CONV2D}#{suffix}") for suffix in ("depthwise", "one_channel")]
    lone = alone.get(_CONV2D, {}).get("ops", [])
    if any(v is None for v in variants) or not annotated(lone):
        return None
    depthwise, one_channel = (v.get("ops", []) for v in variants)
    if not any(annotated(ops) for ops in (depthwise, one_channel)):
        return []
    if not (annotated(depthwise) and annotated(one_channel)) or len(depthwise) != 1:
        return None
    seen = [_activation_qspecs(ops[0]) for ops in (lone, depthwise, one_channel)]
    return depthwise if seen[1] == seen[2] != seen[0] else None


def _thin_variant(probed: dict[str, Any], key: str) -> list[str]:
    """The activation qspecs of a chain's ``#thin`` probe (its conv of one input channel per
    group), op by op; empty when it was not probed."""
    return _qspecs((probed.get("alone") or {}).get(f"{key}#{THIN_CHAIN}", {}).get("ops", []))


def _qspecs(ops: list[dict[str, Any]]) -> list[str]:
    return [_activation_qspecs(op) for op in ops]


def _activation_qspecs(op: dict[str, Any]) -> str:
    """An op's activation input and output qspecs as text (a weight observer built per node,
    nncf's, differs between any two convs)."""
    return json.dumps([op["inputs"].get("0"), op["output"]], sort_keys=True)


def _depthwise_gaps(probed: dict[str, Any]) -> list[Gap]:
    """The depthwise conv annotated otherwise than the conv of a one-channel input (OpenVINO's
    quantizer observes a depthwise conv's input per channel, any other conv's per tensor):
    both have one input channel per group, and ``when`` tests that (``weight.shape.1``) or an
    argument's value, not ``groups`` equal to the input channels, so no entry tells them
    apart. (Both annotated alike is :func:`_thin_convs_float`'s case, which ``when`` states.)"""
    alone = probed.get("alone") or {}
    depthwise, one_channel = (
        (alone.get(f"{_CONV2D}#{suffix}") or {}).get("ops", [])[:1]
        for suffix in ("depthwise", "one_channel")
    )
    if not depthwise or not one_channel:
        return []
    # The activation's qspecs only: a weight observer built per node (nncf's, from that
    # node's weight) differs between any two convs, which this gap is not about.
    activation = [_activation_qspecs(ops[0]) for ops in (depthwise, one_channel)]
    if activation[0] == activation[1]:
        return []
    shown = [_input_observer(ops[0]) for ops in (depthwise, one_channel)]
    return [
        Gap(
            _CONV2D,
            f"a depthwise conv (groups = input channels) has its input {shown[0]}, a conv of a "
            f"one-channel input {shown[1]}: both have one input channel per group "
            "(weight.shape.1 = 1), and `when` cannot test groups = input channels",
        )
    ]


def _input_observer(op: dict[str, Any]) -> str:
    """How an op's first input is observed, in words (``observed per_channel_symmetric by
    PerChannelMinMaxObserver, ch_axis 1``)."""
    qspec = (op.get("inputs") or {}).get("0")
    if not qspec:
        return "float"
    if qspec.get("kind") != "observed":
        return f"{qspec.get('kind')}"
    axis = f", ch_axis {qspec['ch_axis']}" if "per_channel" in str(qspec.get("qscheme")) else ""
    return f"observed {qspec.get('qscheme')} by {qspec.get('observer')}{axis}"


#: How many spellings of a chain's later ops :func:`_tail_spellings` writes at most.
_MAX_TAIL_SPELLINGS = 16


def _tail_spellings(names: list[str]) -> list[tuple[str, ...]]:
    """Every spelling of a chain's later ops (names of the packaged table tracing to the same
    ATen op: ``F.relu``, ``torch.relu``, ``method:relu``, ``nn.ReLU``), as tuples. A BatchNorm
    stays a module: only a module is folded."""
    import itertools

    from backend_spec.pt2e.aten import _cached_table

    table = _cached_table()
    choices = []
    for name in names:
        chain = (table.get(name) or {}).get("chain") if "BatchNorm" not in name else None
        same = sorted(
            n for n, d in table.items() if chain and d.get("chain") == chain and "nni." not in n
        )
        choices.append([name, *(n for n in same if n != name)])
    return list(itertools.islice(itertools.product(*choices), _MAX_TAIL_SPELLINGS))


def _spelled(key: str, names: tuple[str, ...], unit_names: dict[str, Any]) -> str | None:
    """The unit key of ``key``'s chain spelled ``names``, when it was probed."""
    spelled = f"{key}@{'>'.join(names)}"
    return spelled if spelled in unit_names else None


def _first_op_apart(probed: dict[str, Any], first: str, unit_names: dict[str, Any]) -> bool:
    """Whether a chain's first op (``nn.Conv2d``) is annotated unlike its functional spelling
    (``F.conv2d``) when each is probed alone: then a fusion starting with it cannot be matched
    by its ATen chain, which covers every spelling."""
    called = functional_name(first)
    if called == first:
        return False
    for key, names in unit_names.items():
        if "@" not in key and tuple(names) == (first,):
            spelled = _spelled(key, (called,), unit_names)
            return spelled is not None and _without_args(
                _first_annotated(probed, key)
            ) != _without_args(_first_annotated(probed, spelled))
    return False


def _spelled_apart(probed: dict[str, Any], key: str, spelled: str) -> bool:
    """Whether a chain's probes written two ways show different annotations on ops of the
    same arguments (``F.hardtanh``'s defaults beside ``nn.ReLU6``: the difference may be
    theirs, which ``when`` conditions say, not the spelling's)."""
    args = [[o.get("args") for o in _alone_ops(probed, k)] for k in (key, spelled)]
    return args[0] == args[1] and _without_args(_first_annotated(probed, key)) != _without_args(
        _first_annotated(probed, spelled)
    )


def _float_consumers(probed: dict[str, Any], key: str) -> list[str]:
    """The consumer ops before which the consumer probes (:func:`.probe.consumer_parts`)
    show the op of ``key`` annotated while they themselves carry no qspec: consumers that
    count by their op type alone (X86's flatten before a matmul of its default recipe)."""
    from backend_spec.export.quantizer.probe import CONSUMER_CONTEXT

    found = []
    for unit_key, unit in (probed.get(CONSUMER_CONTEXT) or {}).items():
        op_key, _, consumer = unit_key.partition(">")
        if op_key != key.split("@")[0] or not annotated(unit.get("ops", [])):
            continue
        readers = [o for o in unit.get("post", []) if o["target"] == consumer]
        if readers and not annotated(readers):
            found.append(consumer)
    return found


def _first_op_only(probed: dict[str, Any], ops: list[dict[str, Any]]) -> bool:
    """Whether a chain's annotation is its first op's as a lone op, the others bare."""
    alone = _alone_ops(probed, ops[0]["target"])
    bare = all(not annotated([o]) for o in ops[1:])
    return bare and len(alone) == 1 and _qspecs_of(alone) == _qspecs_of(ops[:1])


#: The Linear chains probed for a quantizer that annotates Linear unlike conv.
_LINEAR_CHAINS = {">".join(chain) for chain in LINEAR_CHAINS}


def _outranks_conv(probed: dict[str, Any]) -> bool:
    """Whether ``conv(x) + linear(y)`` (:data:`.probe.OVER_CONV`) shows its add annotated as
    the Linear + add probe's add and not as the conv + add probe's: the Linear chain claimed
    it first (X86 annotates a per-type config before the global one)."""
    alone = probed.get("alone") or {}
    over = alone.get(OVER_CONV, {}).get("ops", [])
    linear = alone.get("nn.Linear>operator.add", {}).get("ops", [])
    conv = alone.get("nn.Conv2d>operator.add", {}).get("ops", [])
    if len(over) != 1 or len(linear) != 2 or len(conv) != 2 or not over[0].get("annotated"):
        return False
    return _qspecs_of(over) == _qspecs_of(linear[1:]) != _qspecs_of(conv[1:])


def _call_spelling(found: dict[str, tuple[str | None, list[dict[str, Any]]]]) -> str | None:
    """The function spelling that stands for every spelling but the modules: when the op's
    spellings differ only between module classes and the calls, and the calls (annotated)
    agree with each other. ``None`` otherwise (each spelling keeps its own entry)."""
    calls = [n for n in found if not n.startswith("nn.")]
    if len(calls) == len(found) or not calls or found[calls[0]][0] is None:
        return None
    first = found[calls[0]]
    alike = all(
        found[n][0] == first[0] and _qspecs_of(found[n][1]) == _qspecs_of(first[1]) for n in calls
    )
    return calls[0] if alike else None


def _qspecs_of(ops: list[dict[str, Any]]) -> str:
    """The qspecs a unit's ops carry, as comparable text."""
    return json.dumps([(o["inputs"], o["output"]) for o in ops], sort_keys=True)


def _alone_ops(probed: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return (probed.get("alone") or {}).get(key, {}).get("ops", [])


def _at_defaults(ops: list[dict[str, Any]]) -> bool:
    """Whether each argument of probed ops that its schema gives a default has that value."""
    for op in ops:
        packet = torch.ops
        for part in op["target"].split("."):
            packet = getattr(packet, part, None)
        schema = getattr(packet, "_schema", None)
        if schema is None:
            continue
        defaults = {a.name: a.default_value for a in schema.arguments if a.has_default_value()}
        if any(defaults.get(n, v) != v for n, v in (op.get("args") or {}).items()):
            return False
    return True


def _meets(ops: list[dict[str, Any]], when: dict[str, Any]) -> bool:
    """Whether probed ops' arguments meet ``when`` conditions (as the pt2e runtime tests)."""
    return all(
        (o.get("args") or {}).get(name, value) == value for o in ops for name, value in when.items()
    )


def _fused(probed: dict[str, Any], key: str) -> bool:
    """Whether a chain's probes show it annotated as one pattern."""
    _context, ops = _first_annotated(probed, key)
    return len(ops) > 1 and _one_pattern(ops)


def _one_pattern(ops: list[dict[str, Any]]) -> bool:
    """Whether a chain's ops are annotated as one pattern: no qspec inside it, neither on an
    inner output nor on a later op's link input (position 0, the chain's link). A static
    XNNPACK composed after a dynamic one annotates the add + relu after a dynamic conv on
    its own, observing the conv's output as the add's input: two patterns, not a fusion."""
    inner_outputs = any(o["output"] is not None for o in ops[:-1])
    inner_links = any(o["inputs"].get("0") is not None for o in ops[1:])
    return not (inner_outputs or inner_links)


def _without_args(found: tuple[str | None, list[dict[str, Any]]]) -> tuple:
    """A context and its ops without the arguments (spellings differ in how they pass them)."""
    context, ops = found
    return context, [{k: v for k, v in o.items() if k != "args"} for o in ops]


def _first_annotated(probed: dict[str, Any], key: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The first context (``alone``, then with a quantized producer) where the unit's ops carry
    qspecs, and those ops."""
    for context in ("alone", "pre", "post", "pre_post"):
        ops = (probed.get(context) or {}).get(key, {}).get("ops", [])
        if any(
            o["inputs"] and any(v is not None for v in o["inputs"].values()) or o["output"]
            for o in ops
        ):
            return context, ops
    return None, []


#: The policy values a spec need not write.
_DEFAULTS = {key: values[0] for key, values in POLICY_VALUES.items()}


def annotated(ops: list[dict[str, Any]]) -> bool:
    """Whether any of the ops carries a qspec (on an input or its output)."""
    return any(
        any(v is not None for v in o["inputs"].values()) or o["output"] is not None for o in ops
    )


def _quantize_policy(probed: dict[str, Any], key: str, context: str) -> str:
    """``always`` when annotated with float producers; else whether one quantized producer
    (the ``mixed`` context: only the first input's) is enough or all inputs need one."""
    if context in ("alone", "post"):
        return "always"
    # Spellings are probed like their unit; a unit with one float input was not probed
    # ``mixed`` (it is ``pre`` then).
    units = probed.get("mixed") or {}
    found = units.get(key, units.get(key.split("@")[0]))
    if found is None:
        found = (probed.get("pre") or {}).get(key, {})
    mixed = found.get("ops", [])
    return "if_input_quantized" if annotated(mixed) else "if_all_inputs_quantized"


def _fused_with_producer(probed: dict[str, Any], key: str, context: str) -> bool:
    """Whether, after a quantized producer, the op's inputs carry no qspec while its output
    does and the producer's output carries none: one fused pattern (linear + relu)."""
    unit = (probed.get(context) or {}).get(key, {})
    ops, producers = unit.get("ops", []), unit.get("pre", [])
    return bool(
        ops
        and producers
        and not any(q is not None for q in ops[0]["inputs"].values())
        and ops[-1]["output"] is not None
        and all(p["output"] is None for p in producers)
    )


def _float_after_producer(probed: dict[str, Any], target: str) -> bool:
    """Whether a probed chain ends in ``target`` left float after an op whose output the
    quantizer observed (conv + hardswish where the quantizer fuses only linear + hardswish),
    the conv-producer probes (:data:`.probe.CONV_PRE_CONTEXT`) included."""
    chains = [unit.get("ops", []) for unit in (probed.get("alone") or {}).values()]
    chains += [
        [*unit.get("pre", []), *unit.get("ops", [])]
        for unit in (probed.get(CONV_PRE_CONTEXT) or {}).values()
    ]
    return any(
        len(ops) > 1
        and ops[-1]["target"] == target
        and ops[-2]["output"] is not None
        and not annotated(ops[-1:])
        for ops in chains
    )


def _producer_fusions(
    probed: dict[str, Any], unit_names: dict[str, tuple[str, ...]]
) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """``probed`` and ``unit_names`` with a fusion unit ``PRODUCER>OP`` for each one-input op
    that the quantizer annotates as one pattern with the quantized producer of its ``pre``
    probe (:func:`_fused_with_producer`: Core ML's linear + elu, EnnQuantizer's linear + F.relu6)
    where no probed chain has those ATen ops: its ``alone`` probe is the ``pre`` one, producer
    included. Without it the op's own entry would share the producer's observer, which the
    quantizer leaves out. The conv-producer probes (:data:`.probe.CONV_PRE_CONTEXT`) give the
    conv chains of the ops fused after a Linear (Core ML's conv + leaky_relu)."""
    alone = probed.get("alone") or {}
    known = {
        tuple(o["target"] for o in alone.get(key, {}).get("ops", []))
        for key, names in unit_names.items()
        if len(names) > 1
    }
    found: dict[str, Any] = {}
    names_of: dict[str, tuple[str, ...]] = {}
    for context in ("pre", CONV_PRE_CONTEXT):
        for key, names in unit_names.items():
            unit = (probed.get(context) or {}).get(key, {})
            producers = unit.get("pre", [])
            if "@" in key or len(names) != 1 or len(producers) != 1:
                continue
            first = PRODUCER_NAMES.get(producers[0]["target"])
            ops = [*producers, *unit["ops"]]
            if first is None or tuple(o["target"] for o in ops) in known:
                continue
            if not _fused_with_producer(probed, key, context):
                continue
            chain = f"{first}>{names[0]}"
            found[chain] = {"ops": ops, "pre": [], "post": []}
            names_of[chain] = (first, names[0])
    if not found:
        return probed, unit_names
    return {**probed, "alone": {**alone, **found}}, {**unit_names, **names_of}


def sharing_probe(probed: dict[str, Any]) -> tuple[str, set[str]] | None:
    """(producer, consumers) for :func:`.probe.sharing_parts`: a conv chain the quantizer
    fuses and whose output it observes otherwise than the activation inputs it observes most
    (Core ML's conv + relu: affine after symmetric), and each single op it quantizes alone
    with an observed input. ``None`` when no chain does (XNNPACK, X86: one qspec for both)."""
    alone = probed.get("alone") or {}
    common = json.dumps(_common_activation(probed), sort_keys=True)
    producers = [
        key
        for key, unit in alone.items()
        if ">" in key
        and "@" not in key
        and "#" not in key
        and len(ops := unit.get("ops", [])) == 2
        and ops[0]["target"] == "aten.conv2d.default"
        and _fused(probed, key)
        and (ops[-1]["output"] or {}).get("kind") == "observed"
        and json.dumps(ops[-1]["output"], sort_keys=True) != common
    ]
    consumers = {
        key
        for key, unit in alone.items()
        if not any(mark in key for mark in ">@#")
        and (qspec := (unit.get("ops") or [{}])[0].get("inputs", {}).get("0"))
        and qspec.get("kind") == "observed"
        and not qspec.get("is_dynamic")
    }
    return (producers[0], consumers) if producers and consumers else None


def observed_again(probed: dict[str, Any]) -> set[str]:
    """The ATen ops that, in the sharing probes (:data:`.probe.SHARING_CONTEXT`), observe the
    producer chain's output again with their own input qspec rather than reuse its observer
    (Core ML's add and mul: ``input_sharing: qspec`` on their entries)."""
    alone = probed.get("alone") or {}
    found = set()
    for key, unit in (probed.get(SHARING_CONTEXT) or {}).items():
        ops, own = unit.get("ops") or [], _alone_ops(probed, key)
        if len(ops) < 2 or not own or alone.get(key) is None:
            continue
        produced, read = ops[-2]["output"], ops[-1]["inputs"].get("0")
        usual = own[0]["inputs"].get("0")
        if usual is not None and produced not in (None, usual) and read == usual:
            found.add(ops[-1]["target"])
    return found


def conv_fusion_keys(probed: dict[str, Any], unit_names: dict[str, tuple[str, ...]]) -> set[str]:
    """The one-input ops (base spellings) fused with the Linear of their ``pre`` probe for
    which no probed chain starts with a conv2d and ends in their ATen op: the conv-producer
    probes tell whether the quantizer fuses them with a conv too."""
    alone = probed.get("alone") or {}
    chained = {
        ops[-1]["target"]
        for key, names in unit_names.items()
        if len(names) == 2
        for ops in [alone.get(key, {}).get("ops", [])]
        if len(ops) == 2 and ops[0]["target"] == "aten.conv2d.default"
    }
    pre = probed.get("pre") or {}
    return {
        key
        for key, names in unit_names.items()
        if "@" not in key
        and len(names) == 1
        and _fused_with_producer(probed, key, "pre")
        and pre[key]["ops"][-1]["target"] not in chained
    }


def _variant_policy(probed: dict[str, Any], key: str) -> dict[str, str]:
    """``scalars`` and ``input_shapes`` of a binary op, from its scalar / broadcast variants."""
    alone = probed.get("alone") or {}
    policy = {}
    scalar = alone.get(f"{key}#scalar", {}).get("ops", [])
    if any(o["inputs"].get("1") is not None for o in scalar):
        policy["scalars"] = "tensor"
    if _equal_shapes_only(alone, key):
        policy["input_shapes"] = "equal"
    return policy


def _equal_shapes_only(alone: dict[str, Any], key: str) -> bool:
    """Whether the binary op of ``key`` is annotated with two tensors of one shape but its
    broadcast variant is left float (``input_shapes: equal``, which leaves numbers float too)."""
    broadcast = alone.get(f"{key}#broadcast")
    return (
        annotated(alone.get(key, {}).get("ops", []))
        and broadcast is not None
        and not annotated(broadcast.get("ops", []))
    )


def _extra_inputs(op: dict[str, Any]) -> bool:
    """Whether a later op of a chain quantizes an input besides the chain link (conv + add)."""
    return any(
        p != "0" and q is not None and q.get("kind") == "observed" for p, q in op["inputs"].items()
    )


def _common_activation(probed: dict[str, Any]) -> dict[str, Any] | None:
    """The observed activation-input qspec seen most often over every probe."""
    counts: dict[str, int] = {}
    for units in probed.values():
        for unit in units.values():
            for op in unit["ops"]:
                for position, qspec in op["inputs"].items():
                    if op["kinds"].get(position) == "act" and qspec and qspec["kind"] == "observed":
                        text = json.dumps(qspec, sort_keys=True)
                        counts[text] = counts.get(text, 0) + 1
    return json.loads(max(counts, key=counts.__getitem__)) if counts else None


def order_pairs(probed: dict[str, Any]) -> list[tuple[str, str]]:
    """``(producer, op)`` pairs for :func:`.probe.order_parts`: each op annotated only after
    a quantized producer (float alone, annotated after a Linear but not fused with it), after
    each other op whose output the quantizer annotates after a Linear."""
    alone, pre = probed.get("alone") or {}, probed.get("pre") or {}
    conditional = [
        key
        for key, unit in pre.items()
        if annotated(unit.get("ops", []))
        and not annotated(alone.get(key, {}).get("ops", []))
        # One pattern with the Linear (Core ML's linear + gelu), not annotated after it.
        and not _fused_with_producer(probed, key, "pre")
    ]
    producers = [
        key
        for key, unit in pre.items()
        if unit.get("ops") and unit["ops"][-1]["output"] is not None
    ]
    # A spelling is placed too (LiteRT annotates nn.AdaptiveAvgPool2d in its own early pass,
    # F.adaptive_avg_pool2d only in the last, propagating one); a producer is an op's own unit.
    return [(p, c) for c in conditional for p in producers if p != c.split("@")[0] and "@" not in p]


def reuse_orders(probed: dict[str, Any]) -> list[list[Any]]:
    """``[producer, consumer, reused]`` (ATen ops, :func:`annotation_stages`' orders) from the
    probes in which a quantized consumer (the probe's Linear after the unit) reads an output
    the quantizer observes otherwise than the consumer's own input: the input reuses that
    observer when the producer was annotated first (a later stage, or graph order), and is
    observed again with the consumer's own qspec when the consumer was (an earlier stage).
    Core ML annotates in passes, convs, then Linear, then add and mul: a Linear after add +
    relu observes the relu's affine output again with its own symmetric qspec, one after
    conv + relu reuses it. The consumer's own qspec is the one it reads after a float op."""
    own: dict[str, str] = {}
    read: list[tuple[str, str, str, str]] = []
    for context in ("post", "pre_post"):
        for unit in (probed.get(context) or {}).values():
            ops, after = unit.get("ops") or [], unit.get("post") or []
            qspec = after[0]["inputs"].get("0") if ops and after else None
            if qspec is None or qspec.get("kind") != "observed":
                continue
            consumer, text = after[0]["target"], json.dumps(qspec, sort_keys=True)
            produced = ops[-1]["output"]
            if produced is None:
                own.setdefault(consumer, text)
            elif produced.get("kind") == "observed":
                first = _pattern_start([*unit.get("pre", []), *ops])
                read.append((first, consumer, json.dumps(produced, sort_keys=True), text))
    found = _passing_orders(probed)
    for producer, consumer, produced, text in read:
        usual = own.get(consumer)
        if usual is None or produced == usual or producer == consumer:
            continue
        if text in (produced, usual) and [producer, consumer, text == produced] not in found:
            found.append([producer, consumer, text == produced])
    return found


def _passing_orders(probed: dict[str, Any]) -> list[list[Any]]:
    """``[op, conv, reused]`` from the probes of an op between a chain and a conv
    (:data:`.probe.SHARING_POST_CONTEXT`): a conv that reads the op's annotated output with
    its own input qspec was annotated before the op (Core ML's convs before its pools)."""
    found: list[list[Any]] = []
    for unit in (probed.get(SHARING_POST_CONTEXT) or {}).values():
        ops = unit.get("ops") or []
        if len(ops) < 2 or ops[-2]["output"] is None:
            continue
        between, conv = ops[-2], ops[-1]
        usual = (_alone_ops(probed, conv["target"]) or [{}])[0].get("inputs", {}).get("0")
        read = conv["inputs"].get("0")
        if usual is not None and read is not None:
            order = [between["target"], conv["target"], read != usual]
            if order not in found:
                found.append(order)
    return found


def _pattern_start(ops: list[dict[str, Any]]) -> str:
    """The first op of the pattern that annotated the last of ``ops`` (a chain in graph
    order): after the last earlier op whose output is observed (conv -> add + relu is two
    patterns, add's; linear + relu one, linear's)."""
    start = len(ops) - 1
    while start > 0 and ops[start - 1]["output"] is None:
        start -= 1
    return ops[start]["target"]


def annotation_stages(orders: list[list[Any]]) -> dict[str, int]:
    """ATen op -> ``annotation_stage`` from the order probes (``[producer, op, annotated]``):
    an op annotated after a producer is in its stage or a later one (one pass annotates in
    graph order: propagated ops both ways), an op left float after it in an earlier stage.
    Each op gets the lowest stage these allow; when they contradict each other (an op that
    would have to come before itself), the ops left float alone decide. Empty when graph
    order already agrees with every probe, or when even those contradict each other."""
    if all(seen for _p, _c, seen in orders):
        return {}
    # (earlier, later, how many stages apart at least)
    edges = {(p, c, 0) if seen else (c, p, 1) for p, c, seen in orders}
    found = _layers(edges)
    if found is None:
        found = _layers({edge for edge in edges if edge[2]})
    return found or {}


def _layers(edges: set[tuple[str, str, int]]) -> dict[str, int] | None:
    """The lowest stages meeting every ``(earlier, later, gap)``; None if none do."""
    nodes = {n for first, then, _gap in edges for n in (first, then)}
    stages = dict.fromkeys(nodes, 0)
    for _ in range(len(nodes) + 1):
        changed = False
        for first, then, gap in edges:
            if stages[then] < stages[first] + gap:
                stages[then], changed = stages[first] + gap, True
        if not changed:
            break
    if changed or max(stages.values(), default=0) > MAX_ANNOTATION_STAGE:
        return None
    return {key: stage for key, stage in stages.items() if stage}


def _borrows_input(targets: list[str], output: dict[str, Any] | None) -> bool:
    """Whether a single op with no qspec of its own on its input but an observed or a fixed
    output is an ``input_observer: upstream_only`` entry (EnnQuantizer's softmax; LiteRT's
    sigmoid, fixed qparams out, its input left to the producer's observer); a chain's first
    op without one is a gap."""
    return len(targets) == 1 and output is not None and output.get("kind") in ("observed", "fixed")


def _shares_producer(first: dict[str, Any], position: str | None, observation: Any) -> bool:
    """Whether an ``output_share_observer_with_input`` op's input is a
    ``SharedQuantizationSpec`` of its producer (Core ML's and LiteRT's pools, XNNPACK's
    propagation): it takes the producer's observer whatever its qspec, ``input_observer:
    upstream_only``, when it is also left float after a float producer (an op that then
    quantizes its input with a qspec of its own, EnnQuantizer's pool, is not borrowing)."""
    share = ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT
    shared = first["inputs"].get(position) if position is not None else None
    return observation == share and shared == {"kind": "shared", "with": f"producer:{position}"}


def _scalar_observations(probed: dict[str, Any]) -> dict[str, Any]:
    """Binary op -> how it is observed when one operand is a number (``x * 0.5``, probed
    alone), where that may differ from its tensor form: its output observed with a qspec of its
    own (the tensor form may share its input's), or nothing annotated while two tensors of any
    shape are (where broadcasts are left float too, ``input_shapes: equal`` says both)."""
    alone = probed.get("alone") or {}
    found = {}
    for key, unit in alone.items():
        ops = unit.get("ops", [])
        if not key.endswith("#scalar") or len(ops) != 1:
            continue
        base = key.removesuffix("#scalar")
        output = ops[0]["output"]
        if output is not None and output.get("kind") == "observed":
            found[ops[0]["target"]] = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
        elif (
            not annotated(ops)
            and annotated(alone.get(base, {}).get("ops", []))
            and not _equal_shapes_only(alone, base)
        ):
            found[ops[0]["target"]] = ObservationType.INPUT_OUTPUT_NOT_OBSERVED
    return found


def _dynamic_propagation(probed: dict[str, Any]) -> set[str]:
    """The single ops, float alone, that a dynamic anchor's float output counts as a quantized
    producer for (``output: if_consumer_quantized`` on the dynamic anchors):
    - those quantized with a dynamic input qspec after a quantized producer: dynamic qspecs
      propagate through them (X86's dynamic config through pools and cat), and their entries'
      dtype configs are dynamic with a quantized output (version 8);
    - those quantized with any qspec after a producer quantized dynamically: a static X86
      composed after a dynamic one (``ComposableQuantizer``) takes the dynamic Linear for a
      quantized pattern and quantizes the pool after it statically."""
    alone = probed.get("alone") or {}
    found = set()
    for context in ("pre", "mixed", "pre_post"):  # flatten: only before a quantizable consumer
        for key, unit in (probed.get(context) or {}).items():
            ops = unit.get("ops", [])
            if len(ops) != 1 or annotated(alone.get(key, {}).get("ops", [])):
                continue
            dynamic_input = any(q and q.get("is_dynamic") for q in ops[0]["inputs"].values())
            if dynamic_input or (annotated(ops) and _dynamic_producers(unit)):
                found.add(ops[0]["target"])
    return found


def _dynamic_producers(unit: dict[str, Any]) -> bool:
    """Whether a probe's producers are all quantized dynamically (a dynamic input qspec)."""
    producers = unit.get("pre", [])
    return bool(producers) and all(
        any(q and q.get("is_dynamic") for q in op["inputs"].values()) for op in producers
    )


def _upstream_readers(probed: dict[str, Any]) -> set[str]:
    """The single ops whose input shares an observer further up (``input_observer:
    upstream``): in the ``gap`` probes (a quantized producer, then ``abs`` left float), the
    op's input or output shares a qspec elsewhere in the graph (the producer's)."""
    found = set()
    for unit in (probed.get("gap") or {}).values():
        ops = unit.get("ops", [])
        if len(ops) != 1:
            continue
        qspecs = [*ops[0]["inputs"].values(), ops[0]["output"]]
        if any(q == {"kind": "shared", "with": "other"} for q in qspecs):
            found.add(ops[0]["target"])
    return found


def _uncustomized_qrange(qspec: dict[str, Any], kwargs: dict[str, Any], dtype: Any) -> bool:
    """Whether an observed qspec leaves its range unset where that changes its qparams: a
    symmetric uint8 observer without ``quant_min``/``quant_max`` puts its zero point at 128,
    one given the full range at 127 (version 8 ``customized_qrange: false``; elsewhere the
    two compute alike, and the spec stays at its older version)."""
    unset = all(qspec.get(key) is None and kwargs.get(key) is None for key in _RANGE_KEYS)
    symmetric = "symmetric" in (qspec.get("qscheme") or "")
    return unset and symmetric and dtype == torch.quint8


_RANGE_KEYS = ("quant_min", "quant_max")


def _fixed_observer(qspec: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ``QuantizationSpec`` whose constructor is a ``FixedQParamsObserver`` (EnnQuantizer's
    sigmoid) as the fixed qspec it amounts to: prepare observes with the same observer."""
    if qspec is None or qspec.get("observer") != "FixedQParamsObserver":
        return qspec
    kwargs = qspec.get("kwargs") or {}
    if "scale" not in kwargs or "zero_point" not in kwargs:
        return qspec
    fixed = {key: qspec[key] for key in ("dtype", "quant_min", "quant_max", "qscheme")}
    return {"kind": "fixed", **fixed, "scale": kwargs["scale"], "zero_point": kwargs["zero_point"]}


def _param_qspec(node: dict[str, Any], position: str) -> dict[str, Any] | None:
    if node["kinds"].get(position) != "param":
        return None
    return node["inputs"].get(position)


def _own_output(act: dict[str, Any], output: dict[str, Any]) -> bool:
    """Whether an observed output differs from its observed static input only in what a
    version 9 output mapping says on its own (observer and qscheme), not in dtype or range."""
    if output.get("kind") != "observed" or act.get("kind") != "observed" or act.get("is_dynamic"):
        return False
    same = ("dtype", "quant_min", "quant_max", "is_dynamic")
    return all(act.get(key) == output.get(key) for key in same)


def _comparable(qspec: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in qspec.items() if k != "kind"}, sort_keys=True)


def _alternatives(target: str) -> list[str]:
    """The target and its in-place twin, as the packaged table writes chains."""
    from backend_spec.pt2e.aten import _cached_table

    for described in _cached_table().values():
        for alternatives in described.get("chain") or ():
            if alternatives[0] == target:
                return list(alternatives)
    return [target]


def _merged(known: Entry, other: Entry) -> Entry | None:
    """``known`` now also matching ``other``'s ATen ops, when ``other`` (an entry of
    ``known``'s op name) quantizes as ``known`` does; else None."""
    alike = (
        known.get("observation_type") == other.get("observation_type")
        and known.dtype_configs == other.dtype_configs
        and known.get("root_module") == other.get("root_module")
        and dict(known.policy) == dict(other.policy)
        and len(known.aten) == len(other.aten) == 1
        and len(known.aten[0]) == len(other.aten[0])
    )
    if not alike:
        return None
    merged = tuple(
        (*a, *(op for op in b if op not in a))
        for a, b in zip(known.aten[0], other.aten[0], strict=True)
    )
    return replace(known, aten=(merged,))


def _traces_to(pattern: Any) -> str | None:
    """The ATen op torch.export traces ``pattern`` to (an entry matches it too): ``None`` when
    it traces to none, ``"..."`` when to a chain of several ops."""
    from backend_spec.pt2e.aten import describe_op

    chain = describe_op(pattern).get("chain")
    if not chain:
        return None
    return chain[0][0] if len(chain) == 1 else "..."


def _own_qconfigs(entries: tuple[Entry, ...], name: str, qat: bool) -> tuple[Entry, ...]:
    """``qconfig: own`` (version 11) on the entries whose first op's QConfig, decided by that
    op's own entry, meets none of their dtype configs: a chain quantized otherwise than its
    first op alone (a static XNNPACK composed after a dynamic one: conv + relu static, a lone
    conv dynamic), which would otherwise stay float."""
    from backend_spec import SPEC_VERSION
    from backend_spec.pt2e.rules import UNSATISFIED, compile_rules, entry_labels

    backend = Backend(name, entries, version=SPEC_VERSION)
    table, _report = compile_rules(backend, qat=qat)
    unmet = {rule.label for rule in table.rules if rule.reason == UNSATISFIED}
    if not unmet:
        return entries
    return tuple(
        replace(entry, policy=(*entry.policy, ("qconfig", "own")))
        if label in unmet and _chain(entry) and _quantizes(entry)
        else entry  # a one-op entry decides its own QConfig; a float one claims under any
        for entry, label in entry_labels(backend)
    )


def _chain(entry: Entry) -> bool:
    """Whether the entry's pattern has more than one op."""
    from backend_spec.analysis.qconfigs import forward_ops

    return len(forward_ops(entry.pattern, entry.get("pattern_complex_format")) or ()) > 1


def _quantizes(entry: Entry) -> bool:
    """Whether some dtype config of the entry quantizes its input or its weight."""
    return any(
        not (config.mapping(key).dtype or torch.float).is_floating_point
        for config in entry.dtype_configs
        for key in ("input_dtype", "weight_dtype")
    )


def _renamed(config: Entry, pattern: Any) -> Entry:
    values = {
        "pattern": pattern,
        "observation_type": config.get("observation_type"),
        "dtype_configs": config.dtype_configs,
    }
    return replace(config, key=key_of(pattern), fields=Entry.ordered(values))


def _resolve(pattern: Any) -> Any:
    from backend_spec.names.naming import resolve_name

    # FX fuses module chains only with a fuser, while function chains are plain patterns.
    if isinstance(pattern, tuple):
        return tuple(resolve_name(functional_name(n)) for n in pattern)
    return resolve_name(functional_name(pattern))


def _reference_modules(op: Any) -> dict[str, Any]:
    """A module op keeps its weight quantized only with a root and reference module (FX swaps
    the module; the pt2e rule follows FX): take them from torch's native backend. A module
    chain (spelled with its modules) is rooted at its first module."""
    if isinstance(op, tuple):
        op = op[0]
    if not isinstance(op, type):
        return {}
    from backend_spec.names.vocabulary import builtin_backend_config

    for known in builtin_backend_config("native").configs:
        if known.pattern is op and known.reference_quantized_module is not None:
            return {
                "root_module": known.root_module,
                "reference_quantized_module": known.reference_quantized_module,
            }
    return {}


#: The most ops torch's forward ``pattern`` takes (``set_pattern``: "a tuple with 2 or 3
#: elements"); a longer chain is written in the complex format.
_FORWARD_OPS = 3


def _nested(ops: tuple[Any, ...], extras: tuple[int, ...]) -> tuple[Any, ...]:
    """A forward chain in torch's reversed nested complex format, each op of ``extras``
    reading the chain first and anything (``MatchAllNode``) after it: conv, bn, add, relu
    with the add in ``extras`` -> ``(relu, (add, (bn, conv), MatchAllNode))``, as torch's
    onednn backend writes conv-bn-add-relu (the pt2e runtime traces it as the chain:
    :func:`backend_spec.pt2e.rules.traceable_complex`)."""
    from torch.ao.quantization.utils import MatchAllNode

    nested: Any = ops[0]
    for index, op in enumerate(ops[1:], start=1):
        nested = (op, nested, MatchAllNode) if index in extras else (op, nested)
    return nested


def _torch_getters(nested: Any) -> dict[str, Any]:
    """The ``root_node_getter`` and ``extra_inputs_getter`` torch's onednn backend gives the
    same complex pattern (FX's default root of a complex pattern is its last-matched node,
    the add's other input; torch's getters name the conv): none when torch has none."""
    from backend_spec.names.vocabulary import builtin_backend_config

    for known in builtin_backend_config("onednn").configs:
        if known._pattern_complex_format == nested:
            getters = (
                ("root_node_getter", known._root_node_getter),
                ("extra_inputs_getter", known._extra_inputs_getter),
            )
            return {key: FunctionRef.of(value) for key, value in getters if value is not None}
    return {}


def _resolve_exact(names: list[str]) -> Any:
    """The pattern exactly as spelled (modules stay modules): matched by how it was written."""
    from backend_spec.names.naming import resolve_name

    resolved = tuple(resolve_name(name) for name in names)
    return resolved[0] if len(resolved) == 1 else resolved
