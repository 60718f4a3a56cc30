"""Probe a pt2e Quantizer: annotate small exported graphs and read what it wrote, as plain data.

A Quantizer is a function from graphs to annotations, so its behaviour can be observed rather
than read from its code. Every unit probed (one ATen op of the packaged table, or a chain such
as conv -> relu) becomes a *branch* of one "board" model, so that one ``torch.export`` covers
every unit; the board is exported once per *context*, which is what the units' annotations
may depend on:

- ``alone``: the unit reads the board's inputs and its result is a board output;
- ``pre``: each float input comes from an ``nn.Linear`` (a producer quantizers quantize);
- ``mixed``: only the first input comes from a Linear, the others are board inputs;
- ``post``: the result feeds an ``nn.Linear``;
- ``pre_post``: both;
- ``gap``: each float input comes from an ``nn.Linear`` through ``abs``, an op quantizers
  leave float (some then share the Linear's qparams across it: ``input_observer: upstream``).

The quantizer then runs exactly as ``prepare_pt2e`` runs it (conv/linear-bn folding,
``transform_for_annotation``, ``annotate``), and each branch's annotations are written down
as JSON-able dicts (:func:`describe_qspec`). Nothing here interprets them: that is
:mod:`.infer`'s job.
"""

from __future__ import annotations

import copy
import functools
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendPatternConfig, quiet, torch
from backend_spec.pt2e.runtime import lazily

nn = torch.nn

CONTEXTS = ("alone", "pre", "mixed", "post", "pre_post", "gap")
#: Where a spelling is probed besides its unit: ``pre_post`` because some quantizers annotate an
#: op only between quantized ops (X86's flatten), where its spellings must be compared too.
SPELLING_CONTEXTS = ("alone", "pre", "pre_post")

#: Chains probed besides the packaged table's single ops: the fusions quantizers annotate as
#: one unit (spec op names, forward order). The table's own multi-op chains come from fused
#: module classes; these are written with plain modules so that export sees separate ops.
FUSION_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("nn.Conv1d", "nn.ReLU"),
    ("nn.Conv2d", "nn.ReLU"),
    ("nn.Conv3d", "nn.ReLU"),
    ("nn.Conv2d", "nn.BatchNorm2d"),
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.ReLU"),
    ("nn.Conv1d", "nn.BatchNorm1d"),
    ("nn.Conv1d", "nn.BatchNorm1d", "nn.ReLU"),
    ("nn.Conv2d", "nn.ReLU6"),
    ("nn.Conv2d", "nn.Hardtanh"),
    ("nn.Conv2d", "nn.Hardswish"),
    ("nn.Conv2d", "nn.SiLU"),
    ("nn.ConvTranspose2d", "nn.ReLU"),
    ("nn.ConvTranspose2d", "nn.BatchNorm2d"),
    ("nn.ConvTranspose2d", "nn.BatchNorm2d", "nn.ReLU"),
    ("nn.Linear", "nn.ReLU"),
    ("nn.Linear", "nn.ReLU6"),
    ("nn.Linear", "nn.Hardtanh"),
    ("nn.Linear", "nn.BatchNorm1d"),
    ("nn.Linear", "nn.Tanh"),
    ("nn.Linear", "nn.LeakyReLU"),
    ("nn.Linear", "nn.GELU"),
    ("operator.add", "nn.ReLU"),
    ("operator.mul", "nn.ReLU"),
    ("nn.Conv2d", "operator.add"),
    ("nn.Conv2d", "operator.add", "nn.ReLU"),
    # QAT annotates before it folds: X86 fuses conv-bn-add(-relu) as one unit of four ops
    # (written in the complex format, :func:`.infer._nested`); in PTQ the BN is folded and
    # these show what conv-add(-relu) shows.
    ("nn.Conv2d", "nn.BatchNorm2d", "operator.add"),
    ("nn.Conv2d", "nn.BatchNorm2d", "operator.add", "nn.ReLU"),
    # ... and conv-bn with each activation it fuses after conv (X86's QAT unary patterns).
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.ReLU6"),
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.Hardtanh"),
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.Hardswish"),
    ("nn.Conv2d", "nn.BatchNorm2d", "nn.SiLU"),
)

#: ATen ops that models produce but no name of the packaged table traces to (indexing, a
#: squeeze of one dimension, a mean over everything...): ``(ATen key, spec op names, call,
#: input shape)``, each probed as a unit of its own. Quantizers pass qparams through such ops
#: (XNNPACK's ``propagate_annotation`` shares them through slice, squeeze.dim and mean), so the
#: spec needs an entry for each one the quantizer annotates. The entry is written with the
#: first name; as an entry also matches its name's own trace (``torch.squeeze``:
#: aten.squeeze.default), :mod:`.infer` falls back to a later name that traces to nothing when
#: the quantizer treats the traced op otherwise.
EXTRA_UNITS: tuple[tuple[str, tuple[str, ...], Any, tuple[int, ...]], ...] = (
    ("aten.slice.Tensor", ("operator.getitem",), lambda x: x[:, :4], (2, 8, 4, 4)),
    ("aten.select.int", ("torch.select",), lambda x: torch.select(x, 1, 0), (2, 8, 4, 4)),
    (
        "aten.squeeze.dim",
        ("torch.squeeze", "torch.squeeze_copy"),
        lambda x: torch.squeeze(x, 1),
        (2, 1, 4, 4),
    ),
    ("aten.mean.default", ("torch.mean",), torch.mean, (2, 8, 4, 4)),
    ("aten.clone.default", ("torch.clone",), torch.clone, (2, 8, 4, 4)),
    ("aten.expand.default", ("method:expand",), lambda x: x.expand(2, 8, 4, 4), (2, 1, 4, 4)),
    # Ops outside the built-in backends that delegates annotate (EnnQuantizer): without a
    # probe, a spec would leave them float where the quantizer observes them.
    ("aten.gelu.default", ("F.gelu",), torch.nn.functional.gelu, (2, 8, 4, 4)),
    ("aten.sin.default", ("torch.sin",), torch.sin, (2, 8, 4, 4)),
    ("aten.cos.default", ("torch.cos",), torch.cos, (2, 8, 4, 4)),
    ("aten.ceil.default", ("torch.ceil",), torch.ceil, (2, 8, 4, 4)),
    ("aten.pow.Tensor_Scalar", ("torch.pow",), lambda x: x**2, (2, 8, 4, 4)),
    (
        "aten.log_softmax.int",
        ("F.log_softmax",),
        lambda x: torch.nn.functional.log_softmax(x, 1),
        (2, 8, 4, 4),
    ),
    ("aten.pad.default", ("F.pad",), lambda x: torch.nn.functional.pad(x, (1, 1)), (2, 8, 4, 4)),
    ("aten.sum.dim_IntList", ("torch.sum",), lambda x: x.sum(1), (2, 8, 4, 4)),
    ("aten.div.Tensor", ("torch.div",), lambda x: torch.div(x, x), (2, 8, 4, 4)),
    ("aten.bmm.default", ("torch.bmm",), lambda x: torch.bmm(x, x), (4, 4, 4)),
    ("aten.rsub.Scalar", ("torch.rsub",), lambda x: 1 - x, (2, 8, 4, 4)),
)

#: Ops of the table that are not worth a branch: they vanish or only move memory in place, or
#: (batch_norm) leave a BatchNorm that no conv folds, for which ``convert_pt2e`` re-exports
#: ~100 conv-bn QAT patterns (minutes) although nothing is folded. (``aten.embedding`` is
#: probed, with integer indices: a quantizer may annotate its weight and nothing else.)
_SKIPPED_OPS = ("aten.detach", "aten.resize_", "aten.batch_norm")


@dataclass(frozen=True)
class Unit:
    """One probed thing: spec op names (forward order) and its ATen chain key.

    A *spelling* unit (``spelling=True``, key ``KEY@NAME``) is the same ATen op written another
    way (``F.adaptive_avg_pool2d`` beside ``nn.AdaptiveAvgPool2d``): quantizers that match
    source partitions annotate some spellings only. Spellings are probed alone and after a
    quantized producer."""

    names: tuple[str, ...]
    key: str
    spelling: bool = False


@functools.cache
def units() -> tuple[Unit, ...]:
    """Every unit probed: one per single-op ATen chain of the packaged table, then the fusions.

    The representative name of a chain is the table's first, preferring module classes and
    ``F.`` functions (their one-op models exercise the op's usual arguments)."""
    from backend_spec.pt2e.aten import _cached_table

    by_key: dict[str, list[str]] = {}
    for name, described in _cached_table().items():
        chain = described.get("chain")
        if not chain or len(chain) != 1 or _skipped(chain[0][0]) or name.startswith("nni."):
            continue
        by_key.setdefault(chain[0][0], []).append(name)
    found = []
    for key, names in sorted(by_key.items()):
        chosen = _preferred(names)
        found.append(Unit((chosen,), key))
        found += [Unit((n,), f"{key}@{n}", True) for n in sorted(names) if n != chosen]
    for names in FUSION_CANDIDATES:
        found.append(Unit(names, ">".join(names)))
        spelled = functional_tail(names)
        if spelled != names:
            found.append(Unit(spelled, f"{'>'.join(names)}@{'>'.join(spelled)}", True))
        called = functional_chain(names)
        if called not in (names, spelled):
            found.append(Unit(called, f"{'>'.join(names)}@{'>'.join(called)}", True))
    return tuple(found)


def functional_chain(names: tuple[str, ...]) -> tuple[str, ...]:
    """A fusion written with functions throughout (``F.conv2d`` then ``F.relu``), BatchNorm
    chains aside (only a module is folded): a quantizer that matches a module type for a
    per-type config (XNNPACK's ``set_module_type(nn.Conv2d, ...)``) annotates the chain of a
    conv called as a function with its global config, which neither module-first spelling
    shows."""
    if any("BatchNorm" in name for name in names):
        return names
    return (functional_name(names[0]), *functional_tail(names)[1:])


def functional_tail(names: tuple[str, ...]) -> tuple[str, ...]:
    """A fusion with every module after the first written as a function (``nn.Conv2d`` then
    ``F.hardswish``): quantizers that match module classes (X86) do not fuse it, so a fusion
    entry must then name the modules rather than the ATen chain. BatchNorm stays a module
    (only a module is folded), and so do operators (``torch.add`` beside ``+`` in one graph
    makes X86InductorQuantizer raise)."""
    return names[:1] + tuple(
        functional_name(n) if n.startswith("nn.") and "BatchNorm" not in n else n for n in names[1:]
    )


def functional_name(name: str) -> str:
    """The functional spelling of an op when the table has one (``nn.ReLU`` -> ``F.relu``)."""
    from backend_spec.pt2e.aten import _cached_table

    table = _cached_table()
    chain = (table.get(name) or {}).get("chain")
    if not chain:
        return name
    same = [n for n, d in table.items() if d.get("chain") == chain and not n.startswith("nni.")]
    for prefix in _FUNCTION_PREFIXES:
        for candidate in sorted(same):
            if candidate.startswith(prefix):
                return candidate
    return name


#: Op names preferred for a functional spelling, in order.
_FUNCTION_PREFIXES = ("F.", "torch.", "operator.", "nn.", "method:")


def _skipped(target: str) -> bool:
    """Ops not probed: see :data:`_SKIPPED_OPS`; in-place twins (``aten.tanh_``) are matched
    through their out-of-place op's alternatives."""
    return target.startswith(_SKIPPED_OPS) or target.split(".")[1].endswith("_")


def _preferred(names: list[str]) -> str:
    for prefix in ("nn.", "F.", "torch.", "operator.", "method:"):
        for name in sorted(names):
            if name.startswith(prefix) and not name.startswith("nni."):
                return name
    return sorted(names)[0]


class Probe(nn.Module):
    """One unit in one context: producers of its inputs, the unit, a consumer of its output."""

    def __init__(self, model: nn.Module, widths: list[int], out: int, context: str) -> None:
        super().__init__()
        count = {"pre": len(widths), "pre_post": len(widths), "mixed": 1, "gap": len(widths)}
        made = _gap if context == "gap" else _linear
        self.pre = nn.ModuleList(made(w) for w in widths[: count.get(context, 0)])
        self.op = copy.deepcopy(model)
        self.post = _linear(out) if context in ("post", "pre_post") else nn.Identity()

    def forward(self, *inputs: Any) -> Any:
        values = list(inputs)
        for slot, producer in enumerate(self.pre):
            values[slot] = producer(values[slot])
        return self.post(self.op(*values))


class NeighbourProbe(Probe):
    """A probe whose quantized neighbours are not Linears, for quantizers that leave Linear
    float or dynamic (:func:`neighbour_parts`): 1x1 convolutions (``Conv2d`` on 4-D tensors,
    ``Conv1d`` on 3-D ones; a consumer of an output of another rank is a Linear), or, where
    the quantizer quantizes no conv either, a ``cat`` of one tensor (XNNPACK under a per-type
    config its conv annotator never matches: only cat is quantized, and what propagates after
    it shows only after it)."""

    def __init__(
        self, model: nn.Module, inputs: tuple, output: Any, context: str, neighbour: str
    ) -> None:
        super().__init__(model, [], 0, "alone")
        made_by = _conv if neighbour == "conv" else _cat_of_one
        count = {"pre": len(inputs), "pre_post": len(inputs), "mixed": 1, "gap": len(inputs)}
        made = [made_by(t) for t in inputs[: count.get(context, 0)]]
        if context == "gap":
            made = [
                nn.Sequential(m, _Abs()) if _width(t) else m
                for m, t in zip(made, inputs, strict=False)
            ]
        self.pre = nn.ModuleList(made)
        if context in ("post", "pre_post"):
            if neighbour != "conv":
                self.post = _cat_of_one(output)
            elif output.dim() in (3, 4):
                self.post = _conv(output)
            else:
                self.post = _linear(_width(output))


#: The ATen op of each producer the probes put before a unit (:func:`_linear`, :func:`_conv`)
#: -> its spec name (a fusion :mod:`.infer` learns from a ``pre`` probe starts with it).
PRODUCER_NAMES = {
    "aten.linear.default": "nn.Linear",
    "aten.conv2d.default": "nn.Conv2d",
    "aten.conv1d.default": "nn.Conv1d",
}


def _conv(tensor: Any) -> nn.Module:
    """A 1x1 convolution keeping ``tensor``'s shape (Identity for a non-float tensor)."""
    if not _width(tensor):
        return nn.Identity()
    channels = int(tensor.shape[1])
    return (nn.Conv2d if tensor.dim() == 4 else nn.Conv1d)(channels, channels, 1)


class _CatOfOne(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x], 0)


def _cat_of_one(tensor: Any) -> nn.Module:
    """A ``cat`` of ``tensor`` alone, its shape kept (Identity for a non-float tensor)."""
    return _CatOfOne() if _width(tensor) else nn.Identity()


def _linear(width: int) -> nn.Module:
    """A quantizable producer / consumer of a tensor whose last dimension is ``width``."""
    return nn.Linear(width, width) if width > 0 else nn.Identity()


class _Abs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x)


def _gap(width: int) -> nn.Module:
    """A quantizable producer, then an op quantizers leave float (``abs``)."""
    return nn.Sequential(nn.Linear(width, width), _Abs()) if width > 0 else nn.Identity()


class Suite(nn.Module):
    """Independent models side by side (``branches.N``), inputs flattened in order, one output
    per branch: one export and one ``prepare_pt2e`` cover them all, which matters because
    some quantizers re-export their own patterns on every ``annotate`` call (XNNPACK's conv-bn
    annotator costs seconds per call)."""

    def __init__(self, branches: list[nn.Module], arity: list[int]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)
        self.arity = arity

    def forward(self, *flat: Any) -> tuple:
        outputs, start = [], 0
        for index, branch in enumerate(self.branches):
            outputs.append(branch(*flat[start : start + self.arity[index]]))
            start += self.arity[index]
        return tuple(outputs)


@dataclass
class Branch:
    """What a suite branch is: a probe (unit key and context) or a verification model."""

    label: str
    unit: str | None = None
    context: str | None = None


@dataclass
class SuiteParts:
    """A suite's modules, inputs and branch descriptions (before export)."""

    modules: list[nn.Module] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    arity: list[int] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)

    def add(self, branch: Branch, module: nn.Module, inputs: tuple) -> None:
        """One branch. Its tensors are copies: the probes of one unit share their example
        inputs, and ``torch.export`` makes one graph input of a tensor passed twice, so a
        quantizer observing a graph input for one branch would observe it for the others."""
        self.modules.append(module.eval())
        self.inputs.extend(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs)
        self.arity.append(len(inputs))
        self.branches.append(branch)


def probe_parts() -> tuple[SuiteParts, dict[str, tuple[str, ...]]]:
    """Every unit that can be built, in every context; and unit key -> op names."""
    parts, names = SuiteParts(), {}
    for unit, model, inputs, output in _built_units():
        names[unit.key] = unit.names
        widths = [_width(t) for t in inputs]
        for context in _contexts(unit, widths):
            probe_module = Probe(model, widths, _width(output), context)
            parts.add(Branch(f"{context}:{unit.key}", unit.key, context), probe_module, inputs)
    _add_extra_units(parts, names)
    _add_variants(parts)
    _add_thin_chains(parts)
    return parts, names


@functools.cache
def _built_units() -> tuple[tuple[Unit, nn.Module, tuple, torch.Tensor], ...]:
    """Each unit of :func:`units` that can be built: (unit, model, example inputs, output)."""

    torch.manual_seed(0)
    return tuple(found for found in map(_build, units()) if found is not None)


def _build(unit: Unit) -> tuple[Unit, nn.Module, tuple, torch.Tensor] | None:
    """(unit, model, example inputs, output) of a unit, ``None`` if it cannot be built."""
    from backend_spec.check.synthesize import SkipPattern, synthesize
    from backend_spec.names.naming import resolve_name

    try:
        ops = tuple(resolve_name(name) for name in unit.names)
        with quiet():
            made = synthesize(BackendPatternConfig(ops[0] if len(ops) == 1 else ops))
            output = made.model(*made.example_inputs)
    except (SkipPattern, Exception):  # noqa: BLE001 - a unit that cannot be built is skipped
        return None
    if isinstance(output, torch.Tensor) and output.is_floating_point():
        return unit, made.model, tuple(made.example_inputs), output
    return None


#: Chains through a Linear that a quantizer may annotate in a pass of their own (X86 annotates
#: a per-type config of Linear, linear + add [+ relu] included, before the global config's
#: conv + add): probed, alone, only for a quantizer that annotates Linear unlike conv
#: (:func:`override_parts`), with :data:`OVER_CONV`.
LINEAR_CHAINS: tuple[tuple[str, ...], ...] = (
    ("nn.Linear", "operator.add"),
    ("nn.Linear", "operator.add", "nn.ReLU"),
)
#: The unit key of ``conv(x) + linear(y)``: whether a Linear chain claims the add before conv +
#: add can (the add's annotation is then the Linear chain's, not conv + add's).
OVER_CONV = "nn.Linear>operator.add#over_conv"


def override_parts(parts: SuiteParts, names: dict[str, tuple[str, ...]]) -> None:
    """Add :data:`LINEAR_CHAINS` and :data:`OVER_CONV` (context ``alone``, labels starting
    with ``override:``) to ``parts``, and their op names to ``names``. Only for a quantizer
    that annotates Linear unlike conv: the main suite, and so every other export, stays as
    it is."""
    import operator

    for chain in LINEAR_CHAINS:
        built = _build(Unit(chain, ">".join(chain)))
        if built is None:
            continue
        unit, model, inputs, output = built
        names[unit.key] = unit.names
        widths = [_width(t) for t in inputs]
        branch = Branch(f"override:alone:{unit.key}", unit.key, "alone")
        parts.add(branch, Probe(model, widths, _width(output), "alone"), inputs)
    torch.manual_seed(0)
    inputs = (torch.randn(2, 4, 8, 8), torch.randn(2, 4, 8, 8))
    over = Probe(_Binary(operator.add, None), [8, 8], 0, "pre")
    over.pre[0] = nn.Conv2d(4, 4, 1)
    parts.add(Branch(f"override:alone:{OVER_CONV}", OVER_CONV, "alone"), over, inputs)


#: The contexts :func:`neighbour_parts` probes (``alone`` does not depend on a neighbour).
NEIGHBOUR_CONTEXTS = ("pre", "mixed", "post", "pre_post", "gap")


def neighbour_parts(
    keys: set[str], neighbour: str = "conv", contexts: tuple[str, ...] = NEIGHBOUR_CONTEXTS
) -> SuiteParts:
    """The single-op units of ``keys`` (spellings and :data:`EXTRA_UNITS` included) probed
    with ``neighbour`` (``conv`` or ``cat``) around them (:class:`NeighbourProbe`) in the
    contexts where a neighbour matters; branch labels start with ``NEIGHBOUR:``. Convolutions
    take only units whose float inputs are 3-D or 4-D. ``contexts``: those of them to probe.

    A small suite of its own, built only for a quantizer that leaves Linear float or dynamic
    and only for the ops whose policy the Linear probes left undetermined: the main suite,
    and so the export of every other config, stays as it is."""
    candidates = [(unit, model, inputs, output) for unit, model, inputs, output in _built_units()]
    for key, names, fn, shape in EXTRA_UNITS:
        torch.manual_seed(0)
        inputs = (torch.randn(*shape),)
        candidates.append((Unit(names[:1], key), _Call(fn), inputs, fn(*inputs)))
    parts = SuiteParts()
    for unit, model, inputs, output in candidates:
        floats = [t for t in inputs if _width(t)]
        if unit.key not in keys or len(unit.names) != 1 or not floats:
            continue
        if neighbour == "conv" and any(t.dim() not in (3, 4) for t in floats):
            continue
        widths = [_width(t) for t in inputs]
        for context in _contexts(unit, widths):
            # pre_post only where one input is (flatten before a consumer): X86 raises on an
            # add of two convs that feeds a conv, which would cost a search for the failure.
            if context in contexts and (context != "pre_post" or len(floats) == 1):
                branch = Branch(f"{neighbour}:{context}:{unit.key}", unit.key, context)
                made = NeighbourProbe(model, inputs, output, context, neighbour)
                parts.add(branch, made, inputs)
    return parts


#: The context of the conv-producer probes of the ops a quantizer fuses with a Linear before
#: them (``Conv2d -> op``): whether it fuses them with a conv too (Core ML's conv + leaky_relu).
CONV_PRE_CONTEXT = "conv_pre"

#: The contexts of :func:`sharing_parts`' probes: a consumer after the chain (unit key: the
#: consumer's), and an op between the chain and a conv (unit key: the op's).
SHARING_CONTEXT = "sharing"
SHARING_POST_CONTEXT = "sharing_post"


def sharing_parts(producer: str, consumers: set[str], passing: tuple[str, ...] = ()) -> SuiteParts:
    """The chain unit ``producer`` then each single-op unit of ``consumers`` reading its output
    in its first input, its other inputs graph inputs (branch ``sharing:PRODUCER>OP``, context
    :data:`SHARING_CONTEXT`): whether the quantizer gives the consumer's input the observer of
    an output it observes otherwise than that input (Core ML's conv + relu: an affine output
    before a symmetric input), or observes it again (Core ML's add and mul do, its conv and
    linear do not). Not one tensor in every input: a quantizer's matcher may take ``add(y,
    y)`` for no add (Core ML's does). And each one-input unit of ``passing`` (annotated only
    after a quantized producer: pools) between the chain and a 1x1 conv (branch
    ``sharing:PRODUCER>OP>conv``, context :data:`SHARING_POST_CONTEXT`): whether the conv
    reads the op's output with its own qspec, annotated before the op (Core ML annotates convs
    before pools), or through the op's observer."""
    units = {unit.key: (model, inputs) for unit, model, inputs, _output in _built_units()}
    parts = SuiteParts()
    if producer not in units:
        return parts
    head, head_inputs = units[producer]
    with quiet(), torch.no_grad():
        produced = head(*head_inputs)
    for key in sorted(consumers):
        model, inputs = units.get(key, (None, ()))
        if model is None or not inputs or any(not _width(t) for t in inputs):
            continue
        chained = _AfterChain(copy.deepcopy(head), copy.deepcopy(model))
        torch.manual_seed(0)
        like = [torch.randn_like(produced) for _ in inputs[1:]]
        for rest in (like, inputs[1:]):  # the chain's shape (add, mul), else the op's own
            made = (*head_inputs, *rest)
            try:
                with quiet(), torch.no_grad():
                    output = chained(*made)
            except Exception:  # noqa: BLE001 - the op does not take these inputs
                continue
            if isinstance(output, torch.Tensor) and output.is_floating_point():
                branch = Branch(f"sharing:{producer}>{key}", key, SHARING_CONTEXT)
                parts.add(branch, Probe(chained, [], 0, "alone"), made)
                break
    for key in passing:
        model, inputs = units.get(key, (None, ()))
        if model is None or len(inputs) != 1:
            continue
        try:
            with quiet(), torch.no_grad():
                output = model(produced)
        except Exception:  # noqa: BLE001 - the op does not take the chain's output
            continue
        if isinstance(output, torch.Tensor) and output.is_floating_point() and output.dim() == 4:
            chained = nn.Sequential(copy.deepcopy(head), copy.deepcopy(model), _conv(output))
            branch = Branch(f"sharing:{producer}>{key}>conv", key, SHARING_POST_CONTEXT)
            parts.add(branch, Probe(chained, [], 0, "alone"), head_inputs)
    return parts


class _AfterChain(nn.Module):
    """``op(chain(x), *rest)``: a sharing probe (:func:`sharing_parts`)."""

    def __init__(self, chain: nn.Module, op: nn.Module) -> None:
        super().__init__()
        self.chain, self.op = chain, op

    def forward(self, x: torch.Tensor, *rest: Any) -> Any:
        return self.op(self.chain(x), *rest)


#: The context of :func:`consumer_parts`' probes (unit key ``OP>CONSUMER``).
CONSUMER_CONTEXT = "consumer"


def consumer_parts(parts: SuiteParts, keys: set[str], linear: bool) -> None:
    """Each one-input single-op unit of ``keys`` (ops annotated only before some consumers:
    X86's flatten) between a quantized producer (a Linear when ``linear``, else a 1x1
    convolution) and each single-op unit that can read its output (``op(y)``, or ``op(y, y)``
    / ``op(y, y.mT)`` for two inputs): whether the quantizer annotates the op before a
    consumer it leaves float (X86 tests the consumer's op type: a flatten before a matmul of
    the default recipe is quantized, the matmul is not). Branches ``consumer:OP>CONSUMER``
    (unit ``OP>CONSUMER``, context :data:`CONSUMER_CONTEXT`) are added to ``parts``."""
    built = [b for b in _built_units() if len(b[0].names) == 1 and not b[0].spelling]
    for unit, model, inputs, output in built:
        floats = [t for t in inputs if _width(t)]
        if unit.key not in keys or len(floats) != 1 or len(inputs) != 1:
            continue
        producer = _linear(_width(inputs[0])) if linear else _conv(inputs[0])
        if not linear and inputs[0].dim() not in (3, 4):
            continue
        for reader_unit, reader, reader_inputs, _out in built:
            post = _reader(reader, len(reader_inputs), output)
            if post is None:
                continue
            probe_module = Probe(model, [], 0, "alone")
            probe_module.pre, probe_module.post = nn.ModuleList([producer]), post
            key = f"{unit.key}>{reader_unit.key}"
            branch = Branch(f"{CONSUMER_CONTEXT}:{key}", key, CONSUMER_CONTEXT)
            parts.add(branch, copy.deepcopy(probe_module), inputs)


def _reader(model: nn.Module, arity: int, value: torch.Tensor) -> nn.Module | None:
    """``model`` reading ``value`` (:func:`consumer_parts`), or None if it cannot."""
    for transposed in (False, True):
        if transposed and arity != 2:
            break
        reader = _Reading(copy.deepcopy(model), arity, transposed)
        try:
            with quiet(), torch.no_grad():
                result = reader(value)
        except Exception:  # noqa: BLE001 - a unit that cannot read this output is no consumer
            continue
        if isinstance(result, torch.Tensor) and result.is_floating_point():
            return reader
    return None


class _Reading(nn.Module):
    """A consumer unit reading one tensor in each of its inputs (the second transposed)."""

    def __init__(self, model: nn.Module, arity: int, transposed: bool) -> None:
        super().__init__()
        self.model, self.arity, self.transposed = model, arity, transposed

    def forward(self, x: torch.Tensor) -> Any:
        rest = [x.mT if self.transposed else x] * (self.arity - 1)
        return self.model(x, *rest)


def order_parts(pairs: list[tuple[str, str]]) -> SuiteParts:
    """Each ``(producer, op)`` pair of one-input single-op units probed as ``Linear ->
    producer -> op`` (branch ``order:PRODUCER>OP``, unit ``op``, context ``order``): whether
    the quantizer annotates ``op`` after an annotated ``producer`` tells whether it annotated
    the producer first (an ``annotation_stage`` below the op's) or later (above). A pair whose
    producer's output the op cannot take is left out. :data:`EXTRA_UNITS` are placed too: an
    op left unplaced stays in stage 0, apart from the other spellings of its name (LiteRT's
    ``torch.mean`` without dims, propagated in its last pass as ``aten.mean.dim`` is). A
    producer of several float inputs (mul, add) reads the Linear's output in each
    (``Linear -> mul(y, y) -> op``): LiteRT annotates mul after its pools."""
    built: dict[str, tuple[nn.Module, tuple, int]] = {}
    for unit, model, inputs, _output in _built_units():
        floats = [t for t in inputs if _width(t)]
        if len(unit.names) == 1 and inputs and len(floats) == len(inputs):
            built[unit.key] = (model, inputs[:1], len(inputs))
    for key, _candidates, fn, shape in EXTRA_UNITS:
        built.setdefault(key, (_Call(fn), (torch.randn(*shape),), 1))
    parts = SuiteParts()
    for producer, op in pairs:
        if producer not in built or op not in built or built[op][2] != 1:
            continue
        (first, inputs, arity), (second, _inputs, _one) = built[producer], built[op]
        first = copy.deepcopy(first) if arity == 1 else _Fanned(copy.deepcopy(first), arity)
        chained = nn.Sequential(first, copy.deepcopy(second))
        try:
            with quiet(), torch.no_grad():
                output = chained(*inputs)
        except Exception:  # noqa: BLE001 - the op does not take this producer's output
            continue
        if isinstance(output, torch.Tensor) and output.is_floating_point():
            branch = Branch(f"order:{producer}>{op}", op, "order")
            parts.add(branch, Probe(chained, [_width(inputs[0])], 0, "pre"), inputs)
    return parts


def orders(snapshot: dict[int, dict[str, Any]], branches: list[Branch]) -> list[list[Any]]:
    """``[producer, op, annotated]`` of each :func:`order_parts` branch whose producer's
    output the quantizer annotated: whether it then annotated the op too."""
    found = []
    for index, branch in enumerate(branches):
        producer, op = branch.label.removeprefix("order:").split(">")
        ops = snapshot.get(index, {}).get("ops", [])
        first = [o for o in ops if o["target"] == producer]
        last = [o for o in ops if o["target"] == op.split("@")[0]]  # a spelling: its op
        if len(first) == 1 and len(last) == 1 and first[0]["output"] is not None:
            seen = last[0]
            annotated = seen["output"] is not None or any(seen["inputs"].values())
            found.append([producer, op, annotated])
    return found


class _Fanned(nn.Module):
    """A unit of ``arity`` inputs reading one tensor in each (an order probe's producer)."""

    def __init__(self, model: nn.Module, arity: int) -> None:
        super().__init__()
        self.model, self.arity = model, arity

    def forward(self, x: torch.Tensor) -> Any:
        return self.model(*([x] * self.arity))


class _Call(nn.Module):
    """One call of :data:`EXTRA_UNITS` as a module."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _add_extra_units(parts: SuiteParts, names: dict[str, tuple[str, ...]]) -> None:
    """:data:`EXTRA_UNITS`, in every context of a one-input unit."""
    for key, candidates, fn, shape in EXTRA_UNITS:
        inputs = (torch.randn(*shape),)
        names[key] = candidates[:1]
        widths = [_width(t) for t in inputs]
        for context in _contexts(Unit(candidates[:1], key), widths):
            parts.add(
                Branch(f"{context}:{key}", key, context),
                Probe(_Call(fn), widths, _width(fn(*inputs)), context),
                inputs,
            )


def _contexts(unit: Unit, widths: list[int]) -> tuple[str, ...]:
    """The contexts a unit is probed in: ``mixed`` only where it differs from ``pre`` (a
    second float input; :mod:`.infer` reads ``pre`` in its place otherwise)."""
    contexts = SPELLING_CONTEXTS if unit.spelling else CONTEXTS
    if not any(width > 0 for width in widths):
        # No float input (embedding's integer indices): no producer to put before it.
        return tuple(c for c in contexts if c in ("alone", "post"))
    if not any(width > 0 for width in widths[1:]):
        contexts = tuple(c for c in contexts if c != "mixed")
    return contexts


class _Binary(nn.Module):
    """``op(x, other)`` with a Python number or a broadcast tensor as ``other``."""

    def __init__(self, op: Any, other: Any) -> None:
        super().__init__()
        self.fn, self.other = op, other

    def forward(self, x: torch.Tensor, *rest: Any) -> torch.Tensor:
        return self.fn(x, rest[0] if rest else self.other)


#: Variants of binary units, by suffix: a scalar operand (``x * 0.5``; quantizers that turn
#: scalars into tensors quantize it) and a broadcast operand (some annotate equal shapes only).
VARIANTS = ("scalar", "broadcast")


def _variants(key: str, op: Any) -> list[tuple[str, nn.Module, tuple]]:
    x = torch.randn(2, 4, 8, 8)
    return [
        (f"{key}#scalar", _Binary(op, 0.5), (x,)),
        (f"{key}#broadcast", _Binary(op, None), (x, torch.randn(1, 4, 1, 1))),
    ]


#: Variants of a conv2d with one input channel per group, by suffix: a depthwise conv
#: (groups = channels) and a conv of a one-channel input (groups 1). Dynamic XNNPACK leaves
#: both float (its test is the weight's size along dimension 1), which ``groups`` alone
#: cannot tell apart from a grouped conv.
CONV_VARIANTS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "depthwise": (lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4), (2, 4, 8, 8)),
    "one_channel": (lambda: nn.Conv2d(1, 4, 3, padding=1), (2, 1, 8, 8)),
}


def _add_variants(parts: SuiteParts) -> None:
    import operator

    found = [
        item
        for key, op in (("aten.add.Tensor", operator.add), ("aten.mul.Tensor", operator.mul))
        for item in _variants(key, op)
    ]
    torch.manual_seed(0)
    for suffix, (made, shape) in CONV_VARIANTS.items():
        found.append((f"aten.conv2d.default#{suffix}", made(), (torch.randn(*shape),)))
    for variant, module, inputs in found:
        widths = [_width(t) for t in inputs]
        parts.add(
            Branch(f"alone:{variant}", variant, "alone"),
            Probe(module, widths, 0, "alone"),
            inputs,
        )


#: The suffix of a conv2d chain's variant whose conv has one input channel per group.
THIN_CHAIN = "thin"


def _add_thin_chains(parts: SuiteParts) -> None:
    """Each chain that starts with a conv2d, alone, with a conv of one input channel per group
    (branch ``alone:CHAIN#thin``): a quantizer may fuse such a chain otherwise (dynamic
    XNNPACK leaves those convs float, and a static one composed after it fuses them)."""
    for unit, model, inputs, _output in _built_units():
        if unit.names[0] != "nn.Conv2d" or len(unit.names) < 2 or "@" in unit.key:
            continue
        variant = _with_thin_conv(model)
        if variant is not None:
            key = f"{unit.key}#{THIN_CHAIN}"
            widths = [_width(t) for t in inputs]
            probe_module = Probe(variant, widths, 0, "alone")
            parts.add(Branch(f"alone:{key}", key, "alone"), probe_module, inputs)


def _with_thin_conv(model: nn.Module) -> nn.Module | None:
    """A copy of ``model`` whose first conv2d is grouped to one input channel per group (same
    channels, kernel and padding); ``None`` when its output channels do not allow it."""
    made = copy.deepcopy(model)
    for name, module in made.named_modules():
        if type(module) is nn.Conv2d:
            if module.out_channels % module.in_channels:
                return None
            thin = nn.Conv2d(
                module.in_channels,
                module.out_channels,
                module.kernel_size,
                stride=module.stride,
                padding=module.padding,
                groups=module.in_channels,
                bias=module.bias is not None,
            )
            made.set_submodule(name, thin)
            return made
    return None


def _width(tensor: Any) -> int:
    if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.dim() > 0:
        return int(tensor.shape[-1])
    return 0


def export_suite(parts: SuiteParts, train: bool = False) -> Any:
    """The suite's ExportedProgram (``.module()`` is the graph quantizers prepare); with
    ``train``, of the models in training mode (what ``prepare_qat_pt2e`` takes)."""
    suite = Suite(parts.modules, parts.arity).train(train)
    with quiet(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(suite, tuple(parts.inputs))
    separate_sources(exported.graph)
    return exported


def fold_batch_norms(module: Any) -> Any:
    """``module`` with each BatchNorm after a conv or a 2-D Linear folded into its weights, as
    ``prepare_pt2e`` folds them before annotating (torchao's ``_fuse_conv_bn_`` then
    ``_fuse_linear_bn_``, unchanged). The suite is folded once, so that each quantizer run on it
    finds nothing left to fold: torchao eliminates dead code over the whole graph after each
    BatchNorm it folds, and on the suite (dozens of BatchNorms, thousands of nodes) that was a
    third of every ``prepare_pt2e``. Here the elimination runs once, after the last fold: it only
    removes nodes the folds left unused, so the graph is the one the folds inside
    ``prepare_pt2e`` make. Only for the PTQ flow: ``prepare_qat_pt2e`` does not fold."""
    from torchao.quantization.pt2e.utils import _fuse_conv_bn_, _fuse_linear_bn_

    graph = module.graph
    graph.eliminate_dead_code = lambda *args, **kwargs: False  # deferred to the end
    try:
        with quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fuse_conv_bn_(module)
            _fuse_linear_bn_(module)
    finally:
        del graph.eliminate_dead_code
    graph.eliminate_dead_code()
    module.recompile()
    return module


def separate_sources(graph: Any) -> None:
    """Number each branch's ``torch_fn`` sources as if the branch were exported alone.

    ``torch.export`` names a node's source ``NAME_COUNT``, counting per function over the
    whole export, and ``get_source_partitions`` groups nodes by (name, that id): so
    ``torch.mul`` in one branch and ``a * b`` (``Tensor.mul``) in another, both ``mul_3``,
    become one partition, and a quantizer that annotates a partition's first output only
    (LiteRT's ``_annotate_mul``) leaves one of them float, whichever a set ordered first.
    Branches must not see each other: each gets its own counts, and ids no other branch has.
    """
    counts: dict[tuple[int, str], int] = {}
    for node in graph.nodes:
        source = node.meta.get("torch_fn")
        where = branch_of(node) if source is not None else None
        if where is None or not isinstance(source, tuple) or len(source) != 2:
            continue
        function = str(source[1])
        key = (where[0], function)
        counts[key] = counts.get(key, 0) + 1
        name = function.rsplit(".", 1)[-1]
        node.meta["torch_fn"] = (f"branches.{where[0]}.{name}_{counts[key]}", function)


_PATH = re.compile(r"branches\.(\d+)(?:\.(pre|op|post))?")


def branch_of(node: Any) -> tuple[int, str] | None:
    """(branch index, part) of a suite node: part is ``pre``, ``op`` or ``post`` for probes,
    ``""`` for the nodes of a verification model."""
    stack = node.meta.get("nn_module_stack") or {}
    found = None
    for path, _cls in stack.values():
        text = str(path).replace("[", ".").replace("]", "").replace("L['self'].", "")
        match = _PATH.search(text)
        if match and (found is None or match.group(2)):
            found = (int(match.group(1)), match.group(2) or "")
    return found


def recording(quantizer: Any, candidates: tuple[tuple[str, Any], ...] = ()) -> Any:
    """``quantizer`` wrapped so that its annotations are read right after ``annotate`` (inside
    ``prepare_pt2e``, before observers rewrite the graph): ``.snapshot`` holds
    :func:`read_annotations`'s result, and ``.rewritten`` the ops whose node count the
    quantizer's ``transform_for_annotation`` changed. When it changed the graph, each of the
    ``candidates`` (label, pass: the caller's allow-listed pipelines) runs on a copy of the
    same graph, and the first whose result is the same graph is ``.pipeline``: a spec can
    then name it (spec_version 8). ``.where`` maps the transformed graph's nodes to their
    suite branch and op (the verifier compares the nodes the passes made too)."""
    from torchao.quantization.pt2e.quantizer import Quantizer

    class Recording(Quantizer):
        def __init__(self) -> None:
            super().__init__()
            self.snapshot: dict[int, dict[str, Any]] = {}
            #: ATen op -> (nodes before, nodes after) where the transform changed the count.
            self.rewritten: dict[str, tuple[int, int]] = {}
            #: The output qspec of each float graph input (None: not annotated).
            self.graph_inputs: list[dict[str, Any] | None] = []
            #: The candidate pass that rewrites the graph as the quantizer does, if any.
            self.pipeline: tuple[str, Any] | None = None
            #: Node name -> (branch, ATen op) in the graph the quantizer annotated.
            self.where: dict[str, tuple[int, str]] = {}

        def transform_for_annotation(self, model: Any) -> Any:
            before = op_counts(model.graph)
            original = copy.deepcopy(model) if candidates else None
            result = lazily(quantizer.transform_for_annotation, model)
            after = op_counts(result.graph)
            self.rewritten = {
                op: (before.get(op, 0), after.get(op, 0))
                for op in sorted(before.keys() | after.keys())
                if before.get(op, 0) != after.get(op, 0)
            }
            # Any change (QNN lifts scalar operands into constants: no op count moves).
            if original is not None and graph_shape(original.graph) != graph_shape(result.graph):
                self.pipeline = matching_pass(original, result, candidates)
            self.where = {
                node.name: (found[0], str(node.target))
                for node in result.graph.nodes
                if node.op == "call_function" and (found := branch_of(node)) is not None
            }
            return result

        def annotate(self, model: Any) -> Any:
            result = quantizer.annotate(model)
            self.snapshot = read_annotations(model)
            self.graph_inputs = read_graph_inputs(model)
            return result

        def validate(self, model: Any) -> None:
            quantizer.validate(model)

        def prepare_obs_or_fq_callback(self, model: Any, edge_or_node_to_obs_or_fq: Any) -> None:
            quantizer.prepare_obs_or_fq_callback(model, edge_or_node_to_obs_or_fq)

    return Recording()


def matching_pass(
    original: Any, transformed: Any, candidates: tuple[tuple[str, Any], ...]
) -> tuple[str, Any] | None:
    """The first candidate (label, pass) that turns a copy of ``original`` into the same graph
    as ``transformed`` (:func:`graph_shape`); a candidate that raises is no match."""
    wanted = graph_shape(transformed.graph)
    for label, graph_pass in candidates:
        try:
            with quiet():
                made = lazily(graph_pass, copy.deepcopy(original))
            if graph_shape(made.graph) == wanted:
                return label, graph_pass
        except Exception:  # noqa: BLE001 - the caller's function, tried on a graph: no match
            continue
    return None


def graph_shape(graph: Any) -> list[tuple]:
    """A graph as plain data: each node's kind, target and arguments (other nodes by their
    position), so that two graphs built alike compare equal whatever their node names."""
    index = {node: i for i, node in enumerate(graph.nodes)}

    def plain(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return ("node", index.get(value, -1))
        if isinstance(value, (list, tuple)):
            return tuple(plain(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((k, plain(v)) for k, v in value.items()))
        return repr(value)

    return [
        (node.op, str(node.target), plain(node.args), plain(node.kwargs)) for node in graph.nodes
    ]


def op_counts(graph: Any) -> dict[str, int]:
    """ATen op -> how many call nodes of it the graph has."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_function":
            counts[str(node.target)] = counts.get(str(node.target), 0) + 1
    return counts


def read_graph_inputs(graph_module: Any) -> list[dict[str, Any] | None]:
    """The output qspec a quantizer gave each float graph input (placeholder), as data."""
    found = []
    for node in graph_module.graph.nodes:
        value = node.meta.get("val")
        if node.op != "placeholder" or not isinstance(value, torch.Tensor):
            continue
        if value.is_floating_point():
            annotation = node.meta.get("quantization_annotation")
            qspec = None if annotation is None else annotation.output_qspec
            found.append(describe_qspec(qspec, node, {}))
    return found


def read_annotations(graph_module: Any) -> dict[int, dict[str, Any]]:
    """Per probe branch: its op nodes' annotations, and those of its producer / consumer."""
    found: dict[int, dict[str, Any]] = {}
    observed = _observed_where_read(graph_module)
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or _integer_valued(node):
            continue
        where = branch_of(node)
        if where is None or not where[1]:
            continue
        index, part = where
        described = describe_node(node, observed)
        entry = {"target": str(node.target), **described, "args": scalar_args(node)}
        found.setdefault(index, {"ops": [], "pre": [], "post": []})
        found[index]["ops" if part == "op" else part].append(entry)
    return found


#: The fake-quantize classes (torchao's and torch.ao's) a QAT config's qspecs are built on.
FAKE_QUANT_CLASSES = (
    "FakeQuantize",
    "FusedMovingAvgObsFakeQuantize",
    "LearnableFakeQuantize",
    "_LearnableFakeQuantize",
)


def only_fake_quants(snapshot: dict[int, dict[str, Any]]) -> bool:
    """Whether the quantizer wrote some observed qspec and every one is a fake-quantize (a
    QAT config: export then verifies in the QAT flow)."""
    found = [
        qspec["observer"]
        for unit in snapshot.values()
        for part in unit.values()
        for op in part
        for qspec in [*op["inputs"].values(), op["output"]]
        if qspec is not None and qspec.get("kind") == "observed"
    ]
    return bool(found) and all(name in FAKE_QUANT_CLASSES for name in found)


def _integer_valued(node: Any) -> bool:
    """Whether a node computes an integer tensor (a training-mode BatchNorm's
    ``num_batches_tracked.add_(1)``): no part of a unit a quantizer quantizes."""
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and not value.is_floating_point()


def by_context(snapshot: dict[int, dict[str, Any]], branches: list[Branch]) -> dict[str, Any]:
    """The snapshot as ``{context: {unit key: annotations}}`` (what :mod:`.infer` reads)."""
    result: dict[str, Any] = {context: {} for context in CONTEXTS}
    for index, branch in enumerate(branches):
        if branch.unit is not None:
            empty = {"ops": [], "pre": [], "post": []}
            context = result.setdefault(branch.context or "alone", {})
            context[branch.unit] = snapshot.get(index, empty)
    return result


def scalar_args(node: Any) -> dict[str, Any]:
    """The node's number, bool and string arguments by schema name, defaults included (what a
    ``when`` condition can test: hardtanh's ``min_val``)."""
    from backend_spec.pt2e.runtime import argument_values

    return {
        name: value
        for name, value in argument_values(node).items()
        if isinstance(value, (bool, int, float, str))
    }


def _observed_where_read(graph_module: Any) -> dict[Any, Any]:
    """Graph inputs the quantizer observed on their own output (placeholder -> qspec), when
    it observed only some of them: the observer then quantizes the input of the op that reads
    it, as an observer on that edge would (OpenVINO's quantizer places an op's activation
    observer on the graph input it reads). Every float input observed alike is another
    construct (``graph_inputs``, read by :func:`read_graph_inputs`): nothing is moved then."""
    placeholders = [
        node
        for node in graph_module.graph.nodes
        if node.op == "placeholder"
        and isinstance(node.meta.get("val"), torch.Tensor)
        and node.meta["val"].is_floating_point()
    ]
    qspecs = {
        node: getattr(node.meta.get("quantization_annotation"), "output_qspec", None)
        for node in placeholders
    }
    observed = {node: qspec for node, qspec in qspecs.items() if qspec is not None}
    return {} if len(observed) == len(placeholders) else observed


def describe_node(node: Any, observed: dict[Any, Any] | None = None) -> dict[str, Any]:
    """A node's annotation as data: each input (by argument position) and the output.
    ``observed``: graph inputs observed on their own output, described as the input of the
    op that reads them (:func:`_observed_where_read`)."""
    annotation = node.meta.get("quantization_annotation")
    positions = _arg_positions(node)
    moved = {
        position: describe_qspec(observed[arg], node, positions)
        for position, arg in positions.items()
        if observed and arg in observed
    }
    inputs: dict[str, Any] = {}
    kinds = {position: _kind(arg) for position, arg in positions.items()}
    schema = getattr(node.target, "_schema", None)
    arguments = [a.name for a in schema.arguments] if schema is not None else []
    #: Where the schema's ``weight`` argument is (embedding's is its first).
    weight = str(arguments.index("weight")) if "weight" in arguments else "1"
    if annotation is None:
        return {
            "annotated": False,
            "inputs": moved,
            "kinds": kinds,
            "output": None,
            "weight": weight,
        }
    for arg, qspec in annotation.input_qspec_map.items():
        position = next((p for p, a in positions.items() if a is arg), "?")
        inputs[position] = describe_qspec(qspec, node, positions)
    inputs = {**moved, **inputs}
    return {
        "annotated": bool(getattr(annotation, "_annotated", False)),
        "inputs": inputs,
        "kinds": kinds,
        "output": describe_qspec(annotation.output_qspec, node, positions),
        "weight": weight,
    }


def _kind(arg: Any) -> str:
    """``param`` (a get_attr), ``index`` (an integer tensor: embedding's indices) or ``act``."""
    if arg.op == "get_attr":
        return "param"
    value = arg.meta.get("val")
    if isinstance(value, torch.Tensor) and not value.is_floating_point():
        return "index"
    return "act"


def _arg_positions(node: Any) -> dict[str, Any]:
    """``"0"``, ``"1"``... for node arguments; ``"0.1"`` for the second tensor of a list."""
    positions: dict[str, Any] = {}
    for index, arg in enumerate(node.args):
        if isinstance(arg, torch.fx.Node):
            positions[str(index)] = arg
        elif isinstance(arg, (list, tuple)):
            for inner, item in enumerate(arg):
                if isinstance(item, torch.fx.Node):
                    positions[f"{index}.{inner}"] = item
    return positions


def describe_qspec(qspec: Any, node: Any, positions: dict[str, Any]) -> dict[str, Any] | None:
    """A torchao qspec as JSON-able data (``None``: not quantized)."""
    if qspec is None:
        return None
    kind = type(qspec).__name__
    if kind == "SharedQuantizationSpec":
        return {"kind": "shared", "with": _reference(qspec.edge_or_node, node, positions)}
    data: dict[str, Any] = {
        "dtype": str(qspec.dtype).removeprefix("torch."),
        "quant_min": qspec.quant_min,
        "quant_max": qspec.quant_max,
        "qscheme": None if qspec.qscheme is None else str(qspec.qscheme).removeprefix("torch."),
    }
    if kind == "FixedQParamsQuantizationSpec":
        return {
            "kind": "fixed",
            **data,
            "scale": float(qspec.scale),
            "zero_point": int(qspec.zero_point),
        }
    if kind == "DerivedQuantizationSpec":
        return {
            "kind": "derived",
            **data,
            "ch_axis": qspec.ch_axis,
            "from": [_reference(ref, node, positions) for ref in qspec.derived_from],
            "fn": getattr(qspec.derive_qparams_fn, "__qualname__", repr(qspec.derive_qparams_fn)),
        }
    observer, kwargs = _constructor(qspec.observer_or_fake_quant_ctr)
    found = {
        "kind": "observed",
        **data,
        "ch_axis": qspec.ch_axis,
        "is_dynamic": bool(qspec.is_dynamic),
        "observer": observer,
        "kwargs": kwargs,
    }
    if _converts_itself(qspec.observer_or_fake_quant_ctr):
        found["converts"] = True
    return found


def _converts_itself(ctr: Any) -> bool:
    """Whether the observer class has a ``convert`` method of its own, which ``convert_pt2e``
    calls instead of inserting quantize/dequantize nodes (nncf's weight-compression observers
    put an OpenVINO decompressor module in the weight's place)."""
    while isinstance(ctr, functools.partial) or hasattr(ctr, "p"):
        ctr = (ctr if isinstance(ctr, functools.partial) else ctr.p).func
    return isinstance(ctr, type) and callable(getattr(ctr, "convert", None))


def constructor_name(ctr: Any) -> str:
    """The class an observer / fake-quantize constructor builds."""
    return _constructor(ctr)[0]


def _constructor(ctr: Any) -> tuple[str, dict[str, Any]]:
    """(class name, keyword arguments) of an observer / fake-quant constructor."""
    kwargs: dict[str, Any] = {}
    while isinstance(ctr, functools.partial) or hasattr(ctr, "p"):
        partial = ctr if isinstance(ctr, functools.partial) else ctr.p
        kwargs = {**partial.keywords, **kwargs}
        ctr = partial.func
    plain = {key: _plain(value) for key, value in sorted(kwargs.items())}
    return getattr(ctr, "__name__", type(ctr).__name__), plain


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (torch.dtype, torch.qscheme)):
        return str(value).removeprefix("torch.")
    if isinstance(value, type) or callable(value):
        name, kwargs = _constructor(value)
        return {"class": name, "kwargs": kwargs}
    return repr(value)


def _reference(ref: Any, node: Any, positions: dict[str, Any]) -> str:
    """Where a shared/derived qspec points, relative to ``node``: ``input:0``, ``output``,
    ``producer:0`` (the output of the node at input 0) or ``other`` (elsewhere in the graph)."""
    if isinstance(ref, tuple):
        source, target = ref
        if target is node:
            position = next((p for p, a in positions.items() if a is source), None)
            return f"input:{position}" if position is not None else "other"
        return "other"
    if ref is node:
        return "output"
    position = next((p for p, a in positions.items() if a is ref), None)
    return f"producer:{position}" if position is not None else "other"
