"""Export a hand-written pt2e ``Quantizer`` to a spec, by observing it.

1. **Probe** (:mod:`.probe`): every unit (an ATen op of the packaged table, each spelling of
   it, a fusion) in five contexts, and the verification models (:mod:`.models`), are branches
   of one exported *suite*; the original quantizer prepares it once, and its annotations are
   read right after ``annotate``;
2. **infer** (:mod:`.infer`): turn them into pattern entries, dtype configs and policies,
   noting what the format cannot say;
3. **verify** (:mod:`.verify`): the written text is loaded back; its quantizer prepares the
   same suite (and the caller's ``--probe-models``), and q/dq placement, qparams and outputs
   are compared per branch and ATen op with the original's.

The spec text is returned with the verdict; the CLI writes it (atomically) only when every
branch matched. The suite does not depend on the quantizer, so it is built once per process;
it is never kept on disk, since reading an exported program back unpickles it.
"""

from __future__ import annotations

import copy
import functools
import itertools
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from backend_spec._torch import BackendConfig, quiet
from backend_spec.export.quantizer.infer import Gap, Inferred, infer, rewrite_gaps
from backend_spec.export.quantizer.verify import BranchResult, compare_runs, run

__all__ = ["QuantizerExport", "export_quantizer", "is_quantizer", "quantizer_factory"]


@dataclass
class QuantizerExport:
    """The spec text, what was inferred, and how each branch compared."""

    text: str
    inferred: Inferred
    #: The verification models (built-in and the caller's), one result each.
    models: list[BranchResult] = field(default_factory=list)
    #: The probes (one unit in one context each), one result each.
    probes: list[BranchResult] = field(default_factory=list)
    #: A crash of either quantizer on the suite ("quantizer: ..." / "spec: ..."), or the
    #: inferred spec failing to compile ("compile: ...", bespec's bug as well).
    error: str = ""
    #: Branches the original quantizer itself fails on (left out of probing and verification).
    left_out: list[str] = field(default_factory=list)
    #: The ops the inferred spec's quantizer crashed on (a bug of bespec), when it crashed.
    bug: list[str] = field(default_factory=list)
    #: Whether it was verified in the QAT flow (``prepare_qat_pt2e``, models in training mode).
    qat: bool = False
    #: Why a spec that matched everywhere is still not verified (the probes did not exercise
    #: what the quantizer quantizes): a matched empty spec, ops declared but never probed.
    unverified: list[str] = field(default_factory=list)
    #: The allow-listed pass that reproduced the quantizer's transform_for_annotation (its
    #: label), which the spec runs (spec_version 8); "" when none did.
    pipeline: str = ""

    @property
    def matched(self) -> int:
        return sum(result.identical for result in self.models)

    @property
    def ok(self) -> bool:
        every = self.models + self.probes
        identical = all(result.identical for result in every)
        return not self.error and not self.unverified and identical

    def differing_ops(self) -> dict[str, list[str]]:
        """ATen op -> one line per differing node (``branch: node: what``), models first."""
        found: dict[str, list[str]] = {}
        for result in self.models + self.probes:
            for op, lines in result.differences.items():
                found.setdefault(op, []).extend(f"{result.label}: {line}" for line in lines)
            if not result.outputs_equal and not result.differences:
                found.setdefault("(outputs)", []).append(f"{result.label}: outputs differ")
        return found

    def gaps(self) -> list[Gap]:
        return self.inferred.gaps


def is_quantizer(obj: Any) -> bool:
    """Whether ``obj`` is a torchao pt2e ``Quantizer`` (without importing torchao otherwise)."""
    return is_quantizer_class(type(obj))


def is_quantizer_class(cls: type) -> bool:
    """Whether ``cls`` is a torchao pt2e ``Quantizer`` class (its own or a subclass)."""
    return any(
        base.__name__ == "Quantizer" and base.__module__.startswith("torchao.quantization.pt2e")
        for base in cls.__mro__
    )


def quantizer_factory(obj: Any) -> Callable[[], Any]:
    """A factory of fresh quantizers: annotating may change a quantizer's state, so every
    run gets its own copy of an instance."""
    return functools.partial(copy.deepcopy, obj)


def export_quantizer(
    factory: Callable[[], Any],
    *,
    name: str,
    fmt: str = "yaml",
    probe_models: Iterable[tuple[str, Any, tuple]] = (),
    qat: bool | None = None,
    allow_imports: Iterable[str] = (),
) -> QuantizerExport:
    """Probe, infer, write and verify; see the module docstring.

    ``probe_models`` are ``(label, model, example_inputs)`` added to the verification set.
    ``qat``: verify in the QAT flow (``prepare_qat_pt2e`` on models in training mode, the
    spec's ``quantizer(qat=True)``); ``None`` chooses it when every qspec the quantizer wrote
    on the probes is a fake-quantize (a QAT config), else the PTQ flow.
    ``allow_imports``: the caller's trusted modules; when the quantizer's
    ``transform_for_annotation`` rewrites the graph, a pass of theirs (:func:`pass_candidates`)
    that rewrites it the same way becomes the spec's ``transform_for_annotation``
    (spec_version 8), and the spec is inferred on the graph it produces."""
    quantizer = factory()  # for the checks before probing; the probes get their own
    named = _named_modules(quantizer)
    if named:  # certain before any probe: no probe has the caller's module names
        refused = QuantizerExport("", Inferred(BackendConfig(name)), qat=bool(qat))
        refused.unverified = [
            "the quantizer configures modules by name (set_module_name: "
            f"{', '.join(map(repr, named[:5]))}{', ...' if len(named) > 5 else ''}), which "
            "exist only in the caller's models: a spec states how a backend quantizes each op "
            "wherever it occurs, so export the quantizer without those names"
        ]
        return refused
    if qat is None:
        qat = _fake_quants_only(quantizer)
    flow = _Flow(factory, name, fmt, qat=qat, allow_imports=tuple(allow_imports))
    flow.probe()
    return flow.verify(list(probe_models))


def _fake_quants_only(quantizer: Any) -> bool:
    """Whether every observed qspec of ``quantizer`` is a fake-quantize: a QAT config, verified
    in the QAT flow. Asked before probing (annotating the whole suite twice would double an
    export's time): the qspecs its configs hold (XNNPACK's and X86's ``global_config``, a
    ComposableQuantizer's parts'), else those it writes on two small models."""
    from backend_spec.export.quantizer import probe

    held = _held_qspecs(quantizer)
    if held:
        names = [probe.constructor_name(q.observer_or_fake_quant_ctr) for q in held]
        return all(name in probe.FAKE_QUANT_CLASSES for name in names)
    return _annotates_fake_quants_only(quantizer)


#: How deep and how many objects :func:`_held_qspecs` looks into a quantizer's attributes.
_HELD_DEPTH, _HELD_OBJECTS = 4, 2000


def _held_qspecs(quantizer: Any) -> list[Any]:
    """The observed ``QuantizationSpec`` objects reachable from the quantizer's attributes
    (dicts, lists, tuples and objects, to a bounded depth and count)."""
    found, seen, pending = [], set(), [(quantizer, 0)]
    while pending and len(seen) < _HELD_OBJECTS:
        obj, depth = pending.pop()
        if id(obj) in seen or depth > _HELD_DEPTH or isinstance(obj, (str, bytes, int, float)):
            continue
        seen.add(id(obj))
        if type(obj).__name__ == "QuantizationSpec" and hasattr(obj, "observer_or_fake_quant_ctr"):
            found.append(obj)
            continue
        if isinstance(obj, dict):
            children = list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            children = list(obj)
        elif type(obj).__module__.split(".")[0] in ("torch", "builtins", "functools"):
            children = []  # graphs, modules and callables hold no config
        else:
            children = list(getattr(obj, "__dict__", {}).values())
        pending += [(child, depth + 1) for child in children]
    return found


def _annotates_fake_quants_only(quantizer: Any) -> bool:
    """Whether every observed qspec ``quantizer`` writes on two small models (an MLP, a
    conv-bn-relu net) is a fake-quantize."""
    import warnings

    from backend_spec._torch import torch
    from backend_spec.export.quantizer import probe
    from backend_spec.export.quantizer.models import MODELS
    from backend_spec.pt2e.reuse import reused_patterns

    parts = probe.SuiteParts()
    for label in ("mlp", "conv_bn_relu"):
        model, example_inputs = MODELS[label]()
        parts.add(probe.Branch(label), model, example_inputs)
    try:
        with quiet(), torch.no_grad(), warnings.catch_warnings(), reused_patterns():
            warnings.simplefilter("ignore")
            graph = probe.export_suite(parts).module(check_guards=False)
            graph = quantizer.transform_for_annotation(graph)
            quantizer.annotate(graph)
    except Exception:  # noqa: BLE001 - the probe run reports the quantizer's own failure
        return False
    nodes = [n for n in graph.graph.nodes if n.op == "call_function"]
    return probe.only_fake_quants({0: {"ops": [probe.describe_node(n) for n in nodes]}})


class _Flow:
    """One export in one flow (PTQ or QAT): :meth:`probe`, then :meth:`verify`."""

    def __init__(
        self,
        factory: Callable[[], Any],
        name: str,
        fmt: str,
        qat: bool,
        allow_imports: tuple[str, ...] = (),
    ) -> None:
        self.factory, self.name, self.fmt, self.qat = factory, name, fmt, qat
        self.allow_imports = allow_imports
        self.suite, self.branches, self.unit_names, self.inputs = probe_suite(qat)
        # The verification models are converted; the probes are compared as prepared.
        self.models = {i for i, branch in enumerate(self.branches) if branch.unit is None}
        self.dropped: set[int] = set()
        #: Whether the spec verified best with the spec-wide ``input_sharing: qspec``, which
        #: the alternatives tried after it keep.
        self.spec_wide_qspec = False

    def probe(self) -> None:
        """Run the original on the suite and record its annotations."""
        from backend_spec.export.quantizer import probe

        candidates = pass_candidates(self.allow_imports)
        self.recorder = probe.recording(self.factory(), candidates)
        self.original = run(self.suite, self.recorder, self.inputs, self.models, self.qat)
        if self.original.error:
            self.suite, self.dropped = _without_failing(
                self.suite,
                self.factory,
                (self.inputs, self.models),
                self.branches,
                self.original,
                self.qat,
            )
            self.recorder = probe.recording(self.factory(), candidates)
            self.original = run(self.suite, self.recorder, self.inputs, self.models, self.qat)
            if self.original.error:
                raise ValueError(f"the quantizer fails on the probe suite: {self.original.error}")
        self.probed = probe.by_context(self.recorder.snapshot, self.branches)
        suites = (
            self.probe_neighbours(),
            self.probe_conv_fusions(),
            self.probe_sharing(),
            self.probe_consumers(),
        )
        self.neighbours = [n for n in suites if n]

    def probe_neighbours(self) -> _Neighbours | None:
        """The ops the Linear probes left undetermined, probed again with other neighbours
        (their results replace the Linear probes'), when the quantizer does not quantize
        Linear statically: convolutions where it quantizes conv, else a cat of one tensor
        where it quantizes cat; and, when it annotates Linear unlike conv, the Linear chains
        of :func:`.probe.override_parts`. ``None`` when none applies (the default configs of
        XNNPACK and X86: their export runs the main suite only)."""
        from backend_spec.export.quantizer import probe

        conv = _static(self.probed, "aten.conv2d.default")
        linear = _static(self.probed, "aten.linear.default")
        cat = not (conv or linear) and _static(self.probed, "aten.cat.default", "0.0")
        if not (conv or cat):
            return None
        keys = _undetermined(self.probed)
        parts = probe.SuiteParts()
        if keys and not linear:
            parts = probe.neighbour_parts(keys, "conv" if conv else "cat")
        if conv and _overridden(self.probed):
            # Linear annotated unlike conv (a per-type config): which of its chains the
            # quantizer annotates, and whether they claim an add before conv + add does.
            probe.override_parts(parts, self.unit_names)
        found = self.run_parts(parts)
        if found is None:
            return None
        for context in probe.CONTEXTS:  # alone: only the override units
            self.probed[context].update(found[1][context])
        return found[0]

    def probe_conv_fusions(self) -> _Neighbours | None:
        """The one-input ops the quantizer fuses with the Linear before them, probed after a
        conv (context :data:`.probe.CONV_PRE_CONTEXT`) where no probed conv chain has their
        ATen ops: whether it fuses them with a conv too (Core ML fuses conv and Linear with
        the same activations; XNNPACK and X86 fuse fewer with Linear). ``None`` unless both
        conv and Linear are quantized statically and some op needs it."""
        from backend_spec.export.quantizer import probe
        from backend_spec.export.quantizer.infer import conv_fusion_keys

        conv, linear = (_static(self.probed, key) for key in _ANCHORS[::-1])
        keys = conv_fusion_keys(self.probed, self.unit_names) if conv and linear else set()
        found = self.run_parts(probe.neighbour_parts(keys, "conv", ("pre",)))
        if found is None:
            return None
        self.probed[probe.CONV_PRE_CONTEXT] = found[1].get("pre", {})
        return found[0]

    def probe_sharing(self) -> _Neighbours | None:
        """Each op the quantizer quantizes alone, probed after a conv chain whose output it
        observes otherwise than those inputs (:func:`.probe.sharing_parts`): whether the op
        reuses that observer or observes the output again (``input_sharing``, version 12);
        and each op annotated only after a quantized producer, between that chain and a conv:
        whether the conv was annotated first (an ``annotation_stage`` order). ``None`` when
        no chain does."""
        from backend_spec.export.quantizer import probe
        from backend_spec.export.quantizer.infer import order_pairs, sharing_probe

        found = sharing_probe(self.probed)
        if found is None:
            return None
        passing = tuple(dict.fromkeys(op for _producer, op in order_pairs(self.probed)))
        ran = self.run_parts(probe.sharing_parts(*found, passing))
        if ran is None:
            return None
        for context in (probe.SHARING_CONTEXT, probe.SHARING_POST_CONTEXT):
            self.probed[context] = ran[1].get(context, {})
        return ran[0]

    def probe_consumers(self) -> _Neighbours | None:
        """The ops annotated only before some consumers (X86's flatten), probed before each
        single op that can read their output (:func:`.probe.consumer_parts`): which
        consumers count, those the quantizer leaves float included. After the neighbour
        probes, whose results say which ops those are when Linear is left float."""
        from backend_spec.export.quantizer import probe

        keys = _before_consumers(self.probed)
        linear = _static(self.probed, "aten.linear.default")
        if not keys or not (linear or _static(self.probed, "aten.conv2d.default")):
            return None
        parts = probe.SuiteParts()
        probe.consumer_parts(parts, keys, linear)
        found = self.run_parts(parts)
        if found is None:
            return None
        self.probed[probe.CONSUMER_CONTEXT] = found[1].get(probe.CONSUMER_CONTEXT, {})
        return found[0]

    def run_parts(self, parts: Any) -> tuple[_Neighbours, dict[str, Any]] | None:
        """The original's run on a suite of its own (the quantizer's own failures leave
        those units out: these probes refine, the main suite's results stand), and what it
        annotated by context; None when there is nothing to run or it still fails."""
        from backend_spec.export.quantizer import probe

        if not parts.branches:
            return None
        suite = probe.export_suite(parts, train=self.qat).module(check_guards=False)
        inputs = tuple(parts.inputs)
        recorder = probe.recording(self.factory())
        original = run(suite, recorder, inputs, set(), self.qat)
        if original.error:
            # X86 raises on an add of two convs before a conv.
            try:
                suite, _ = _without_failing(
                    suite, self.factory, (inputs, set()), parts.branches, original, self.qat
                )
            except ValueError:
                return None
            recorder = probe.recording(self.factory())
            original = run(suite, recorder, inputs, set(), self.qat)
            if original.error:
                return None
        found = probe.by_context(recorder.snapshot, parts.branches)
        return _Neighbours(suite, parts.branches, inputs, original), found

    def verify(self, probe_models: list[tuple[str, Any, tuple]]) -> QuantizerExport:
        from backend_spec.export import dump

        branches, fmt, name = self.branches, self.fmt, self.name
        pipeline = self.recorder.pipeline
        try:
            inferred = self.inferred()
            if pipeline is None:
                inferred.gaps += rewrite_gaps(self.recorder.rewritten)
            else:  # the caller's pass rewrites the graph as the quantizer does: the spec runs it
                inferred.backend_config = _with_passes(inferred.backend_config, pipeline[1])
            text = dump(inferred.backend_config, fmt, name=name)
        except Exception as exc:  # noqa: BLE001 - an inferred spec that does not build: our bug
            result = QuantizerExport("", Inferred(BackendConfig(name)), qat=self.qat)
            result.error = f"compile: {type(exc).__name__}: {str(exc)[:300]}"
            return result
        result = QuantizerExport(text, inferred, qat=self.qat)
        result.pipeline = pipeline[0] if pipeline is not None else ""
        result.left_out = [branches[index].label for index in sorted(self.dropped)]
        candidate, spec_run, compared = self.check(text)
        if spec_run.error:
            result.error = f"spec: {spec_run.error}"
            result.bug = _failing_ops(self.suite, spec_run.error)
            return result
        if not all(r.identical for r in compared) and not _only_certain(compared, inferred.gaps):
            # The one choice the probes do not show: whether an input reuses its producer's
            # observer of another qspec (FX, the default) or is observed again (torchao's rule
            # for the quantizer's own qspecs). The verifier decides; when neither matches
            # everywhere, the one that differs on fewer branches is kept, so that a refusal
            # names what the format lacks rather than what this choice would have fixed.
            alternative = _with_input_sharing(inferred, fmt, name)
            if alternative is not None:
                tried = self.check(alternative)
                if not tried[1].error and _differing(tried[2]) < _differing(compared):
                    candidate, spec_run, compared = tried
                    result.text, self.spec_wide_qspec = alternative, True
        # Each with the spec-wide sharing kept, and with FX's when that was torchao's: an
        # entry's own input_sharing (version 12) may say what the spec-wide key said roughly.
        sharings = dict.fromkeys((self.spec_wide_qspec, False))
        for alternative_of, spec_wide_qspec in itertools.product(
            (self.staged, self.claim_staged), sharings
        ):
            if all(r.identical for r in compared) or _only_certain(compared, inferred.gaps):
                break
            alternative = alternative_of(result.text, spec_wide_qspec)
            if alternative is not None:
                tried = self.check(alternative)
                if not tried[1].error and _differing(tried[2]) < _differing(compared):
                    candidate, spec_run, compared = tried
                    result.text = alternative
        kept = [
            (r, b)
            for i, (r, b) in enumerate(zip(compared, branches, strict=True))
            if i not in self.dropped
        ]
        result.models = [r for r, b in kept if b.unit is None]
        result.probes = [r for r, b in kept if b.unit is not None]
        result.probes += self.check_neighbours(candidate, result)
        result.models += _user_models(self.factory, candidate, probe_models, result, self.qat)
        result.unverified = _unexercised(self.factory(), self.suite, inferred)
        return result

    def staged(self, text: str, spec_wide_qspec: bool = False) -> str | None:
        """``text`` with the ``annotation_stage`` of each op that the order probes place
        (:func:`.probe.order_parts`: each op annotated only after a quantized producer, after
        each other annotated op), or ``None`` when they need none. Tried only when the spec
        in graph order does not verify: a quantizer that annotates in passes (LiteRT) leaves
        an op float after a producer of a later pass."""
        orders = self._orders
        if not orders:
            return None
        return self.variant(text, "annotation_stage", spec_wide_qspec, orders=orders)

    @functools.cached_property
    def _orders(self) -> list[list[Any]]:
        """The orders :meth:`staged` places ops by (the order probes run once per export)."""
        from backend_spec.export.quantizer import probe
        from backend_spec.export.quantizer.infer import (
            annotation_stages,
            order_pairs,
            reuse_orders,
        )

        reused, probed = reuse_orders(self.probed), []
        parts = probe.order_parts(order_pairs(self.probed))
        if parts.branches:
            suite = probe.export_suite(parts, train=self.qat).module(check_guards=False)
            recorder = probe.recording(self.factory())
            if not run(suite, recorder, tuple(parts.inputs), set(), self.qat).error:
                probed = probe.orders(recorder.snapshot, parts.branches)
        # Both kinds of order together, else the reuse orders alone: an op the quantizer
        # fuses with the order probe's producer (Core ML's activations) reads as an order
        # that contradicts the others, and then places nothing.
        return next((o for o in (reused + probed, reused) if annotation_stages(o)), probed)

    def claim_staged(self, text: str, spec_wide_qspec: bool = False) -> str | None:
        """``text``'s spec with the Linear chains (:data:`.probe.LINEAR_CHAINS`) claiming their
        nodes before the other entries (``claim_stage``, version 10), or ``None`` when they
        do not outrank conv + add. Tried only when the spec does not verify otherwise: X86's
        QAT config with a per-type Linear config claims Linear + add before its global
        config's longer conv + BatchNorm + add."""
        return self.variant(text, "claim_stage", spec_wide_qspec, claim_first=True)

    def inferred(self, **options: Any) -> Inferred:
        """The spec inferred from the probes (``options``: :func:`.infer.infer`'s), on the
        graph the quantizer's passes produce when a caller's pass reproduces them."""
        pipeline = self.recorder.pipeline
        return infer(
            self.probed,
            self.unit_names,
            self.name,
            self.recorder.graph_inputs,
            rewritten=pipeline is not None,
            qat=self.qat,
            **options,
        )

    def variant(self, text: str, key: str, spec_wide_qspec: bool, **options: Any) -> str | None:
        """The spec inferred with ``options``, or ``None`` when no entry of it sets the policy
        ``key`` they are for (it would be ``text``'s spec again); it runs the graph-order
        spec's passes, and keeps the spec-wide input sharing ``text`` verified best with."""
        from backend_spec.export import dump

        inferred = self.inferred(**options)
        if not any(dict(e.policy).get(key) for e in _entries(inferred)):
            return None
        pipeline = self.recorder.pipeline
        if pipeline is not None:
            inferred.backend_config = _with_passes(inferred.backend_config, pipeline[1])
        sharing = spec_wide_qspec and _with_input_sharing(inferred, self.fmt, self.name)
        return sharing or dump(inferred.backend_config, self.fmt, name=self.name)

    def check_neighbours(self, candidate: Callable[[], Any], result: QuantizerExport) -> list:
        """The neighbour and consumer probes (those that were run) under the spec's
        quantizer."""
        compared: list = []
        for found in self.neighbours:
            spec_run = run(found.suite, candidate(), found.inputs, set(), self.qat)
            if spec_run.error:
                result.error = f"spec: {spec_run.error}"
                result.bug = _failing_ops(found.suite, spec_run.error)
                return []
            labels = [branch.label for branch in found.branches]
            compared += compare_runs(found.suite, labels, found.original, spec_run)
        return compared

    def check(self, text: str) -> tuple[Callable[[], Any], Any, list[BranchResult]]:
        """The spec quantizer of ``text``, its run on the suite, and each branch compared."""
        candidate = _spec_quantizer(text, self.fmt, self.qat, self.allow_imports)
        spec_run = run(self.suite, candidate(), self.inputs, self.models, self.qat)
        labels = [branch.label for branch in self.branches]
        where = self.recorder.where
        compared = (
            []
            if spec_run.error
            else compare_runs(self.suite, labels, self.original, spec_run, where)
        )
        return candidate, spec_run, compared


def _only_certain(compared: list[BranchResult], gaps: list[Gap]) -> bool:
    """Whether every difference is on an op that no spec quantizes as the quantizer does (a
    certain gap: nncf's weight observers convert themselves). Then no other choice of the
    spec (input sharing, annotation stages) can verify it or name fewer ops, and trying
    them would cost full runs of the suite for nothing: the refusal is certain."""
    certain = {gap.op.split("@")[0].split(">")[0] for gap in gaps if gap.certain}
    differing = [result for result in compared if not result.identical]
    return bool(certain) and all(
        result.differences and set(result.differences) <= certain for result in differing
    )


def _differing(compared: list[BranchResult]) -> int:
    """How many branches differ."""
    return sum(not result.identical for result in compared)


@dataclass
class _Neighbours:
    """The conv-neighbour suite (:func:`.probe.neighbour_parts`) and the original's run on it."""

    suite: Any
    branches: list[Any]
    inputs: tuple
    original: Any


def _static(probed: dict[str, Any], key: str, position: str = "0") -> bool:
    """Whether the quantizer quantizes the op of ``key`` alone statically (an observed,
    non-dynamic qspec on its first input: ``position``, ``0.0`` for cat's list)."""
    ops = (probed.get("alone") or {}).get(key, {}).get("ops", [])
    qspec = ops[0]["inputs"].get(position) if ops else None
    return bool(qspec) and qspec.get("kind") == "observed" and not qspec.get("is_dynamic")


def _overridden(probed: dict[str, Any]) -> bool:
    """Whether the quantizer annotates a lone Linear unlike a lone conv (another qspec on its
    input, or none): a per-type config of Linear, whose own pass may claim chains first."""
    alone = probed.get("alone") or {}
    linear, conv = (alone.get(key, {}).get("ops", []) for key in _ANCHORS)
    if not linear or not conv:
        return False
    return linear[0]["inputs"].get("0") != conv[0]["inputs"].get("0")


_ANCHORS = ("aten.linear.default", "aten.conv2d.default")


def _before_consumers(probed: dict[str, Any]) -> set[str]:
    """The single-op units annotated before a consumer (``post``, ``pre_post``) but neither
    alone nor after a quantized producer: their ``consumers`` policy depends on which
    consumers count (:func:`.probe.consumer_parts`)."""
    from backend_spec.export.quantizer.infer import annotated

    def seen(context: str, key: str) -> bool:
        return annotated((probed.get(context) or {}).get(key, {}).get("ops", []))

    return {
        key
        for key in probed.get("pre_post") or {}
        if ">" not in key
        and "#" not in key
        and "@" not in key
        and any(seen(context, key) for context in ("post", "pre_post"))
        and not any(seen(context, key) for context in ("alone", "pre"))
    }


def _undetermined(probed: dict[str, Any]) -> set[str]:
    """The single-op units (spellings included) the quantizer annotated in no context."""
    from backend_spec.export.quantizer.infer import annotated

    keys = {key for units in probed.values() for key in units}
    return {
        key
        for key in keys
        if ">" not in key
        and "#" not in key
        and not any(annotated((units.get(key) or {}).get("ops", [])) for units in probed.values())
    }


def _failing_ops(suite: Any, error: str) -> list[str]:
    """``ATen op (node NAME)`` for each node of the suite the error message names (a crash of
    the inferred spec's quantizer is bespec's bug: the report says where it happened)."""
    import re

    nodes = {node.name: node for node in suite.graph.nodes if node.op == "call_function"}
    named = dict.fromkeys(word for word in re.findall(r"\w+", error) if word in nodes)
    return [f"{nodes[name].target} (node {name})" for name in named]


def _unexercised(quantizer: Any, suite: Any, inferred: Inferred) -> list[str]:
    """Why matching on the suite verifies nothing: the quantizer quantized nothing on any
    probe or model (an empty spec matches a quantizer that annotates ops the suite lacks), or
    it declares ops (``get_supported_operators``) the suite never ran, which the spec then
    leaves out unseen."""
    from backend_spec.ir.lower import backend_of
    from backend_spec.names.labels import object_label

    found = []
    backend = backend_of(inferred.backend_config)
    if not backend.entries and backend.graph_inputs is None:
        found.append(
            "the quantizer quantized nothing on any probe or model, so an empty spec matches "
            "it: nothing verifies it"
        )
    present = {str(node.target) for node in suite.graph.nodes if node.op == "call_function"}
    declared = _declared_ops(quantizer)
    missing = sorted({object_label(op) for op in declared if not _exercised(op, present)})
    if missing:
        found.append(
            "the quantizer declares ops no probe or model exercised (the spec leaves them "
            f"out unverified): {', '.join(missing)}"
        )
    return found


def _named_modules(quantizer: Any) -> list[str]:
    """The module names a quantizer configures apart (``set_module_name``: XNNPACK's
    ``module_name_config``, torchao's ``module_name_qconfig``; a ComposableQuantizer's parts'
    too). No probe has those names, so the probes cannot show what they change."""
    parts = getattr(quantizer, "quantizers", None)
    if isinstance(parts, (list, tuple)):
        return [name for part in parts for name in _named_modules(part)]
    found: list[str] = []
    for attribute, value in getattr(quantizer, "__dict__", {}).items():
        if "module_name" in attribute and isinstance(value, dict):
            found += sorted(str(name) for name in value)
    return found


def _declared_ops(quantizer: Any) -> list[Any]:
    """Every op of the quantizer's ``get_supported_operators()`` (a ComposableQuantizer's
    parts' too); nothing when it declares none."""
    parts = getattr(quantizer, "quantizers", None)
    if isinstance(parts, (list, tuple)):
        return [op for part in parts for op in _declared_ops(part)]
    try:
        configs = quantizer.get_supported_operators()
    except Exception:  # noqa: BLE001 - optional API: most quantizers do not implement it
        return []
    ops = []
    for config in configs or ():
        for pattern in getattr(config, "operators", None) or ():
            ops += pattern if isinstance(pattern, (list, tuple)) else [pattern]
    return ops


def _exercised(op: Any, present: set[str]) -> bool:
    """Whether each ATen op ``op`` traces to is in the suite (an op that cannot be traced is
    not held against the spec: no model could run it)."""
    from backend_spec.pt2e.aten import describe_op

    try:
        chain = describe_op(op).get("chain")
    except Exception:  # noqa: BLE001 - an op torch.export cannot trace alone
        return True
    return not chain or all(any(alt in present for alt in step) for step in chain)


def _without_failing(
    suite: Any,
    factory: Callable[[], Any],
    run_as: tuple[tuple, set[int] | None],
    branches: list,
    failed: Any,
    qat: bool,
) -> tuple[Any, set[int]]:
    """The suite without the branches the quantizer fails on by itself (a quantizer's own bug
    on one op or model must not stop the export of the rest), and their indices. The probes
    of one unit (every context) are searched as one group, each model as its own.
    ``run_as`` is the failing run's (inputs, converted branches), which each trial repeats;
    ``failed`` is that run. When it failed after ``prepare`` succeeded (OpenVINO's observer
    on a LayerNorm bias raises when calibrated), only the calibrated branches are searched:
    each trial then runs a few models, not the hundreds of probes."""
    inputs, converted = run_as
    error = failed.error
    from backend_spec.export.quantizer.verify import (
        MAX_ISOLATION_RUNS,
        failing_branches,
        without,
    )

    # A quantizer that fails on a graph without a single op fails by itself on any model
    # (LiteRT's QAT config builds its conv-bn patterns with an API torchao changed): no
    # branch is to blame, and halving would cost dozens of runs to say so.
    empty = run(without(suite, set(range(len(branches)))), factory(), inputs, qat=qat)
    if empty.error:
        raise ValueError(f"the quantizer fails on any model, even one without ops: {empty.error}")
    grouped: dict[str, list[int]] = {}
    for index, branch in enumerate(branches):
        unit = branch.unit.split("#")[0].split("@")[0] if branch.unit else None
        grouped.setdefault(unit or f"model:{branch.label}", []).append(index)
    groups = list(grouped.values())
    if failed.after_prepare and converted is not None:
        groups = [group for group in groups if converted.intersection(group)]
    dropped = failing_branches(suite, factory, inputs, len(branches), qat, groups, converted)
    if not dropped:
        what = (
            f" (on more probes and models than {MAX_ISOLATION_RUNS} runs can isolate)"
            if dropped is None
            else " (no branch fails alone)"
        )
        raise ValueError(f"the quantizer fails on the probe suite{what}: {error}")
    return without(suite, dropped), dropped


def _user_models(
    factory: Callable[[], Any],
    candidate: Callable[[], Any],
    models: list[tuple[str, Any, tuple]],
    result: QuantizerExport,
    qat: bool,
) -> list:
    """The caller's models, as a suite of their own (exported here, never cached)."""
    from backend_spec.export.quantizer import probe

    if not models:
        return []
    parts = probe.SuiteParts()
    for label, model, example_inputs in models:
        parts.add(probe.Branch(label), model, tuple(example_inputs))
    try:
        suite = probe.export_suite(parts, train=qat).module(check_guards=False)
    except Exception as exc:  # noqa: BLE001 - the user's model, reported as such
        raise ValueError(f"torch.export fails on the probe models: {exc}") from None
    inputs = tuple(parts.inputs)
    first = run(suite, factory(), inputs, qat=qat)
    second = run(suite, candidate(), inputs, qat=qat)
    if first.error or second.error:
        result.error = f"quantizer: {first.error}" if first.error else f"spec: {second.error}"
        return []
    return compare_runs(suite, [b.label for b in parts.branches], first, second)


def _entries(inferred: Inferred) -> tuple[Any, ...]:
    from backend_spec.ir.lower import backend_of

    return backend_of(inferred.backend_config).entries


def _with_input_sharing(inferred: Inferred, fmt: str, name: str) -> str | None:
    """The spec text with ``input_sharing: qspec`` (torchao's rule), None if it has it."""
    from backend_spec.export import dump
    from backend_spec.ir.lower import backend_of, lower

    backend = backend_of(inferred.backend_config)
    if backend.input_sharing == "qspec":
        return None
    return dump(lower(replace(backend, input_sharing="qspec")), fmt, name=name)


def _spec_quantizer(
    text: str, fmt: str, qat: bool = False, allow_imports: tuple[str, ...] = ()
) -> Callable[[], Any]:
    """A factory of the quantizer of ``text`` as a spec file loads it (the file round-trips)."""
    import backend_spec

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"spec.{fmt}"
        path.write_text(text, encoding="utf-8")
        backend_config = backend_spec.load(path, allow_imports=list(allow_imports))
    return functools.partial(backend_spec.quantizer, backend_config, qat=qat)


def _with_passes(backend_config: Any, graph_pass: Callable[[Any], Any]) -> Any:
    """``backend_config`` whose spec runs ``graph_pass`` before annotating (version 8)."""
    from backend_spec.ir import FunctionRef
    from backend_spec.ir.lower import backend_of, lower

    backend = backend_of(backend_config)
    return lower(replace(backend, transform_for_annotation=(FunctionRef.of(graph_pass),)))


#: How many module-level objects :func:`pass_candidates` looks at per allowed module.
_MAX_CANDIDATE_OBJECTS = 2000


def pass_candidates(allow_imports: Iterable[str]) -> tuple[tuple[str, Any], ...]:
    """The graph passes the caller's allowed modules offer: module-level callables (functions,
    or the closures of a factory bound to a module name) defined there whose one required
    parameter is annotated ``GraphModule``. Only modules the caller trusts are imported, and
    only functions that declare a GraphModule parameter are ever called with one."""
    import importlib

    from backend_spec.names.resolver import defining_module
    from backend_spec.names.vocabulary import inside

    allowed = tuple(allow_imports)
    found: list[tuple[str, Any]] = []
    for module_name in allowed:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - a module that does not import offers nothing
            continue
        for attr, obj in list(vars(module).items())[:_MAX_CANDIDATE_OBJECTS]:
            if attr.startswith("_") or isinstance(obj, type) or not callable(obj):
                continue
            if not inside(defining_module(obj) or "", allowed) or not _takes_a_graph(obj):
                continue
            found.append((f"{module_name}.{attr}", obj))
    return tuple(found)


def _takes_a_graph(function: Any) -> bool:
    """Whether ``function`` has exactly one required parameter, annotated ``GraphModule``."""
    import inspect

    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) != 1:
        return False
    annotation = required[0].annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.split(".")[-1] == "GraphModule"


@functools.cache
def _parts() -> tuple[Any, dict[str, tuple[str, ...]]]:
    """The probes of every unit in every context, then the verification models."""
    from backend_spec.export.quantizer import probe

    parts, unit_names = probe.probe_parts()
    for label, model_factory in _models().items():
        model, example_inputs = model_factory()
        parts.add(probe.Branch(label), model, example_inputs)
    return parts, unit_names


def _models() -> dict[str, Callable[[], tuple[Any, tuple]]]:
    from backend_spec.export.quantizer.models import MODELS
    from backend_spec.pt2e.nets import NETS

    return {**MODELS, "x86_net": NETS["x86_net"], "tutorial_net": NETS["tutorial_net"]}


# --- the probe suite ----------------------------------------------------------------------------

#: The suite: the exported program's module, its branches, unit key -> op names, its inputs.
Suite = tuple[Any, list[Any], dict[str, tuple[str, ...]], tuple]


@functools.cache
def probe_suite(qat: bool = False) -> Suite:
    """(exported suite module, its branches, unit key -> op names, inputs), built once per
    process, in training mode for ``qat``.

    It is never cached on disk: an exported program is saved by ``torch.export.save`` and read
    back by ``torch.export.load``, which unpickles (and falls back to unrestricted unpickling
    when the safe load fails), so whoever could write the cache folder would run code in the
    next export. Loading it cost about as much as rebuilding it (docs/security.md)."""
    from backend_spec.export.quantizer import probe

    parts, unit_names = _parts()
    module = probe.export_suite(parts, train=qat).module(check_guards=False)
    if not qat:  # prepare_pt2e's BatchNorm folding, done once for every run on the suite
        module = probe.fold_batch_norms(module)
    return module, parts.branches, unit_names, tuple(parts.inputs)
