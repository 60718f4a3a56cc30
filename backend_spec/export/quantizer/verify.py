"""Quantize one exported suite with two Quantizers and say, per branch and ATen op, what differs.

Both quantizers prepare their own copy of the same exported graph, see the same calibration
batches and are converted with ``convert_pt2e``. Placement and qparams are read with
:func:`backend_spec.pt2e.compare.placement` (the comparison the parity tests use); the nodes
of each suite branch (:class:`.probe.Suite`) are compared separately, and so are the branch
outputs (``torch.equal``).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import quiet, torch

#: Calibration batches each quantizer sees: the example batch only. The qparams still depend on
#: calibration (a MinMax and a Histogram observer disagree on it), and histogram observers,
#: the largest share of an export's time after prepare/convert, are run once per node.
BATCHES = 1


@dataclass
class Run:
    """One quantizer on a suite: placement per node (converted branches), observers per node
    (every branch, as prepared), outputs per branch (``None`` where not converted)."""

    placement: dict[str, list[tuple]]
    outputs: tuple
    error: str = ""
    observers: dict[str, list[tuple]] = field(default_factory=dict)
    #: Whether ``error`` came after ``prepare`` succeeded (in calibration or ``convert_pt2e``):
    #: then only the calibrated branches can be to blame.
    after_prepare: bool = False


@dataclass
class BranchResult:
    """One branch (a verification model or a probe) under both quantizers."""

    label: str
    #: ATen op -> one line per differing node.
    differences: dict[str, list[str]] = field(default_factory=dict)
    outputs_equal: bool = True

    @property
    def identical(self) -> bool:
        return not self.differences and self.outputs_equal


def run(
    exported: Any,
    quantizer: Any,
    inputs: tuple,
    converted: set[int] | None = None,
    qat: bool = False,
) -> Run:
    """prepare, calibrate and convert a copy of ``exported`` with ``quantizer``.

    Only the branches in ``converted`` (all when ``None``) are calibrated and converted; the
    others are compared as prepared (:func:`observers`), which decides their q/dq placement
    and qparams as well: calibrating and converting the hundreds of small probes was most of an
    export's time (a histogram observer's qparams search costs milliseconds each).

    With ``qat`` (a suite exported in training mode) it is ``prepare_qat_pt2e``, training-mode
    forward passes, then ``move_exported_model_to_eval`` before ``convert_pt2e``."""
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    from backend_spec.check.run import forward_passes
    from backend_spec.pt2e.compare import placement
    from backend_spec.pt2e.flows import calibration
    from backend_spec.pt2e.reuse import reused_patterns

    prepared_ok = False
    try:
        with quiet(), torch.no_grad(), warnings.catch_warnings(), reused_patterns():
            warnings.simplefilter("ignore")
            prepare = prepare_qat_pt2e if qat else prepare_pt2e
            prepared = prepare(copy.deepcopy(exported), quantizer)
            observed = observers(prepared, exported)
            prepared_ok = True
            if converted is not None:
                _keep_branches(prepared, converted)
            forward_passes(prepared, calibration(inputs, BATCHES))  # dropout: one seed
            if qat:
                move_exported_model_to_eval(prepared)
            quantized = convert_pt2e(prepared, fold_quantize=False)
            outputs = quantized(*inputs)
    except Exception as exc:  # noqa: BLE001 - a quantizer that crashes is a finding, not a bug
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return Run({}, (), error, after_prepare=prepared_ok)
    return Run(_named_constants(placement(quantized), exported), tuple(outputs), "", observed)


def _keep_branches(prepared: Any, kept: set[int]) -> None:
    """Drop the outputs of the suite branches not in ``kept`` and every node only they used."""
    output = next(node for node in prepared.graph.nodes if node.op == "output")
    leaves = output.args[0]
    output.args = (type(leaves)(v if i in kept else None for i, v in enumerate(leaves)),)
    prepared.graph.eliminate_dead_code()
    prepared.recompile()


def observers(prepared: Any, exported: Any) -> dict[str, list[tuple]]:
    """Per operator node of a prepared graph: the observers on its inputs and its output.

    An observer is told by its class and settings and by the tensors its group observes (an
    instance shared by several edges is one group): two prepared graphs whose nodes read the
    same here get the same qparams from the same calibration, so they convert alike. The
    observers along one edge (a producer's output observer, then the consumer's input one) are
    listed once when they are the same. An instance shared by several edges is inserted once
    per edge under a name of its own (``activation_post_process_3`` is ``_2``): every name
    counts (``named_modules`` would list it under its first name only)."""
    modules = dict(prepared.named_modules(remove_duplicate=False))
    names = {node.name for node in exported.graph.nodes}

    def is_observer(node: Any) -> bool:
        return node.op == "call_module" and _is_observer(modules.get(node.target))

    def source(node: Any) -> Any:
        while isinstance(node, torch.fx.Node) and is_observer(node):
            node = node.args[0]
        return node

    groups: dict[int, set[str]] = {}
    for node in prepared.graph.nodes:
        if is_observer(node):
            groups.setdefault(id(modules[node.target]), set()).add(_name(source(node), names))

    def key(node: Any) -> tuple:
        module = modules[node.target]
        return (_settings(module), tuple(sorted(groups[id(module)])))

    found: dict[str, list[tuple]] = {}
    for node in prepared.graph.nodes:
        if node.op != "call_function":
            continue
        entries: list[tuple] = []
        for index, arg in enumerate(node.all_input_nodes):
            chain = []
            while is_observer(arg):
                chain.insert(0, key(arg))
                arg = arg.args[0]
            if chain:
                unique = [k for i, k in enumerate(chain) if i == 0 or k != chain[i - 1]]
                entries.append(("in", index, _name(arg, names), *unique))
        # An observer nothing reads (on a value no op uses: the in-place BatchNorm counter
        # update Core ML's add pattern matches in training mode) changes no output and is
        # gone after convert_pt2e: it is not compared.
        entries += [("out", key(u)) for u in node.users if is_observer(u) and u.users][:1]
        found[node.name] = entries
    return found


def _is_observer(module: Any) -> bool:
    from torchao.quantization.pt2e.fake_quantize import FakeQuantizeBase
    from torchao.quantization.pt2e.observer import ObserverBase

    return isinstance(module, (ObserverBase, FakeQuantizeBase))


def _name(node: Any, names: set[str]) -> str:
    """A node's name, or ``<constant>`` for one the quantizer made (see _named_constants)."""
    name = getattr(node, "name", str(node))
    return name if name in names else "<constant>"


def _settings(module: Any) -> str:
    """An observer's class, plain attributes and one-element buffers (eps, fixed qparams)."""
    plain = (bool, int, float, str, torch.dtype, torch.qscheme, type(None))
    items = [
        f"{k}={v}"
        for k, v in sorted(vars(module).items())
        if not k.startswith("_") and k != "training" and isinstance(v, plain)
    ]
    items += [
        f"{k}={float(v)}" for k, v in sorted(module.named_buffers(recurse=False)) if v.numel() == 1
    ]
    return f"{type(module).__name__}({', '.join(items)})"


#: Quantizer runs spent finding the branches a quantizer fails on, at most (then the export
#: gives up with the quantizer's error): a quantizer that fails everywhere is not bisected.
MAX_ISOLATION_RUNS = 40


def without(exported: Any, dropped: set[int]) -> Any:
    """A copy of the suite module in which the ``dropped`` branches compute nothing: their
    outputs are ``None`` and their nodes are gone (inputs stay, so the call is unchanged).

    The copy shares ``exported``'s tensors and its nodes' metadata values, and copies only the
    nodes that stay: deep-copying the whole suite (thousands of nodes and parameters) once per
    halving trial was most of the export of a quantizer that fails on some probes. What
    changes a suite (``run``'s ``prepare``) deep-copies it first."""
    if not dropped:
        return exported
    shared = (exported._modules, exported._parameters, exported._buffers)
    memo = {id(exported.graph): _pruned(exported.graph, exported._out_spec, dropped)}
    memo.update((id(part), part) for part in shared)
    return copy.deepcopy(exported, memo)


def _pruned(source: Any, out_spec: Any, dropped: set[int]) -> Any:
    """A copy of the suite graph ``source`` with the ``dropped`` branches' outputs ``None`` and
    only the nodes ``eliminate_dead_code`` would keep: those the other outputs use and the
    impure ones (a BatchNorm's counter update in training mode), with what they use."""
    output = next(node for node in reversed(source.nodes) if node.op == "output")
    leaves, start = list(output.args[0]), 0
    for index, child in enumerate(out_spec.children()):
        if index in dropped:
            leaves[start : start + child.num_leaves] = [None] * child.num_leaves
        start += child.num_leaves
    kept = {leaf for leaf in leaves if isinstance(leaf, torch.fx.Node)}
    for node in reversed(source.nodes):
        if node is output:
            continue
        if node in kept or node.op == "placeholder" or node.is_impure():
            kept.add(node)
            kept.update(node.all_input_nodes)
    graph = torch.fx.Graph(tracer_cls=source._tracer_cls)
    graph._codegen = copy.deepcopy(source._codegen)
    copies: dict[Any, Any] = {}
    for node in source.nodes:
        if node in kept:
            copies[node] = graph.node_copy(node, copies.__getitem__)
    graph.output(torch.fx.map_arg(tuple(leaves), copies.__getitem__))
    return graph


def failing_branches(
    exported: Any,
    factory: Any,
    inputs: tuple,
    count: int,
    qat: bool = False,
    groups: list[list[int]] | None = None,
    converted: set[int] | None = None,
) -> set[int] | None:
    """The branches (of ``count``, which fail together) that ``factory()``'s quantizer fails
    on, found by halving; ``None`` when that takes more than :data:`MAX_ISOLATION_RUNS` runs.

    ``converted`` is :func:`run`'s: each trial runs as the failing run did (the probes only
    prepared), so a branch is left out only when it fails that run, and a trial costs what
    that run cost, not a calibration of every probe (with OpenVINO's quantizer, minutes).

    ``groups`` (default: each branch alone) are halved as units: the probes of one op in
    every context are one group, so a quantizer that fails on an op (OpenVINO's per-channel
    observer on a LayerNorm bias) costs one descent, not one per context. A failing chunk is
    split in two and its first half run; when that half runs clean, the failure is in the
    second half, which is split without a run of its own. (Two groups that fail only
    together then leave out the later one: what remains runs.)"""
    groups = groups if groups is not None else [[index] for index in range(count)]
    failing: set[int] = set()
    pending = [(list(range(len(groups))), True)]  # (chunk of group indices, known to fail)
    runs = 0

    def fails(chunk: list[int]) -> bool:
        nonlocal runs
        runs += 1
        kept = {branch for group in chunk for branch in groups[group]}
        module = without(exported, set(range(count)) - kept)
        kept_converted = None if converted is None else converted & kept
        return bool(run(module, factory(), inputs, kept_converted, qat).error)

    while pending:
        chunk, known = pending.pop()
        if not known:
            if runs >= MAX_ISOLATION_RUNS:
                return None
            if not fails(chunk):
                continue
        if len(chunk) == 1:
            failing.update(groups[chunk[0]])
            continue
        first, second = chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]
        if runs >= MAX_ISOLATION_RUNS:
            return None
        if fails(first):
            pending += [(second, False), (first, True)]
        else:
            pending.append((second, True))
    return failing


def _named_constants(found: dict[str, list[tuple]], exported: Any) -> dict[str, list[tuple]]:
    """Inputs read from constants the quantizer made (a scalar turned tensor is
    ``_tensor_constant0`` in one flow and ``_bespec_scalar0`` in the other) are compared by
    value, not by name."""
    names = {node.name for node in exported.graph.nodes}
    return {
        node: [
            (e[0], e[1], e[2] if e[2] in names else "<constant>", *e[3:]) if e[0] == "in" else e
            for e in entries
        ]
        for node, entries in found.items()
    }


def compare_runs(
    exported: Any,
    labels: list[str],
    first: Run,
    second: Run,
    transformed: dict[str, tuple[int, str]] | None = None,
) -> list[BranchResult]:
    """Per branch of the suite: the nodes whose placement or qparams differ, grouped by op.
    ``transformed``: node -> (branch, op) of the graph both quantizers annotated, when their
    ``transform_for_annotation`` passes made nodes the exported suite does not have."""
    from backend_spec.export.quantizer.probe import branch_of
    from backend_spec.pt2e.compare import placement_differences

    results = [BranchResult(label) for label in labels]
    where = dict(transformed or {})
    for node in exported.graph.nodes:
        found = branch_of(node) if node.op == "call_function" else None
        if found is not None:
            where[node.name] = (found[0], str(node.target))
    # Branches left unconverted (no output) are compared as prepared, the others converted.
    prepared_only = {i for i, out in enumerate(first.outputs) if out is None}
    for compared, line in [
        *((False, line) for line in placement_differences(first.placement, second.placement)),
        *((True, line) for line in _observer_differences(first.observers, second.observers)),
    ]:
        name = line.split(":", 1)[0]
        if name not in where or (where[name][0] in prepared_only) != compared:
            continue
        index, target = where[name]
        results[index].differences.setdefault(target, []).append(line)
    for index, result in enumerate(results):
        a = first.outputs[index] if index < len(first.outputs) else None
        b = second.outputs[index] if index < len(second.outputs) else None
        result.outputs_equal = (a is None and b is None) or equal_outputs(a, b)
    return results


def _observer_differences(first: dict[str, list[tuple]], second: dict[str, list[tuple]]) -> list:
    """One line per node whose observers differ once prepared (:func:`observers`)."""
    from backend_spec.pt2e.compare import node_differences

    return node_differences(first, second, _observer_part, " (as prepared)")


def _observer_part(entry: tuple) -> str:
    keys = entry[3:] if entry[0] == "in" else entry[1:]
    shown = "+".join(settings.split("(")[0] for settings, _group in keys)
    return f"in{entry[1]}<-{entry[2]}[{shown}]" if entry[0] == "in" else f"out[{shown}]"


def equal_outputs(a: Any, b: Any) -> bool:
    """Whether two model outputs (tensors, nested in tuples and lists) are ``torch.equal``."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(equal_outputs(x, y) for x, y in zip(a, b, strict=True))
    return False
