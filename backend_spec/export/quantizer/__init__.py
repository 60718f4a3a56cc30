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
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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
    #: A crash of either quantizer on the suite ("quantizer: ..." / "spec: ...").
    error: str = ""
    #: Branches the original quantizer itself fails on (left out of probing and verification).
    left_out: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(result.identical for result in self.models)

    @property
    def ok(self) -> bool:
        every = self.models + self.probes
        return not self.error and all(result.identical for result in every)

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
) -> QuantizerExport:
    """Probe, infer, write and verify; see the module docstring.

    ``probe_models`` are ``(label, model, example_inputs)`` added to the verification set."""
    from backend_spec.export import dump
    from backend_spec.export.quantizer import probe

    suite, branches, unit_names, inputs = probe_suite()
    recorder = probe.recording(factory())
    # The verification models are converted; the probes are compared as prepared.
    models = {index for index, branch in enumerate(branches) if branch.unit is None}
    original = run(suite, recorder, inputs, models)
    dropped: set[int] = set()
    if original.error:
        suite, dropped = _without_failing(suite, factory, inputs, len(branches), original.error)
        recorder = probe.recording(factory())
        original = run(suite, recorder, inputs, models)
        if original.error:
            raise ValueError(f"the quantizer fails on the probe suite: {original.error}")
    probed = probe.by_context(recorder.snapshot, branches)
    inferred = infer(probed, unit_names, name, recorder.graph_inputs)
    inferred.gaps += rewrite_gaps(recorder.rewritten)
    text = dump(inferred.backend_config, fmt, name=name)
    result = QuantizerExport(text, inferred)
    result.left_out = [branches[index].label for index in sorted(dropped)]
    labels = [branch.label for branch in branches]
    candidate, spec_run, compared = _verify(text, fmt, suite, inputs, models, original, labels)
    if spec_run.error:
        result.error = f"spec: {spec_run.error}"
        return result
    if not all(r.identical for r in compared):
        # The one choice the probes do not show: whether an input reuses its producer's
        # observer of another qspec (FX, the default) or is observed again (torchao's rule
        # for the quantizer's own qspecs). The verifier decides.
        alternative = _with_input_sharing(inferred, fmt, name)
        if alternative is not None:
            tried = _verify(alternative, fmt, suite, inputs, models, original, labels)
            if not tried[1].error and all(r.identical for r in tried[2]):
                candidate, spec_run, compared = tried
                result.text = alternative
    kept = [
        (r, b) for i, (r, b) in enumerate(zip(compared, branches, strict=True)) if i not in dropped
    ]
    result.models = [r for r, b in kept if b.unit is None]
    result.probes = [r for r, b in kept if b.unit is not None]
    result.models += _user_models(factory, candidate, list(probe_models), result)
    return result


def _without_failing(
    suite: Any, factory: Callable[[], Any], inputs: tuple, count: int, error: str
) -> tuple[Any, set[int]]:
    """The suite without the branches the quantizer fails on by itself (a quantizer's own bug
    on one op or model must not stop the export of the rest), and their indices."""
    from backend_spec.export.quantizer.verify import failing_branches, without

    dropped = failing_branches(suite, factory, inputs, count)
    if not dropped:
        raise ValueError(f"the quantizer fails on the probe suite: {error}")
    return without(suite, dropped), dropped


def _user_models(
    factory: Callable[[], Any],
    candidate: Callable[[], Any],
    models: list[tuple[str, Any, tuple]],
    result: QuantizerExport,
) -> list:
    """The caller's models, as a suite of their own (exported here, never cached)."""
    from backend_spec.export.quantizer import probe

    if not models:
        return []
    parts = probe.SuiteParts()
    for label, model, example_inputs in models:
        parts.add(probe.Branch(label), model, tuple(example_inputs))
    try:
        suite = probe.export_suite(parts).module(check_guards=False)
    except Exception as exc:  # noqa: BLE001 - the user's model, reported as such
        raise ValueError(f"torch.export fails on the probe models: {exc}") from None
    inputs = tuple(parts.inputs)
    first, second = run(suite, factory(), inputs), run(suite, candidate(), inputs)
    if first.error or second.error:
        result.error = f"quantizer: {first.error}" if first.error else f"spec: {second.error}"
        return []
    return compare_runs(suite, [b.label for b in parts.branches], first, second)


def _verify(
    text: str,
    fmt: str,
    suite: Any,
    inputs: tuple,
    models: set[int],
    original: Any,
    labels: list[str],
) -> tuple[Callable[[], Any], Any, list[BranchResult]]:
    """The spec quantizer of ``text``, its run on the suite, and each branch compared."""
    candidate = _spec_quantizer(text, fmt)
    spec_run = run(suite, candidate(), inputs, models)
    compared = [] if spec_run.error else compare_runs(suite, labels, original, spec_run)
    return candidate, spec_run, compared


def _with_input_sharing(inferred: Inferred, fmt: str, name: str) -> str | None:
    """The spec text with ``input_sharing: qspec`` (torchao's rule), None if it has it."""
    from backend_spec.export import dump
    from backend_spec.ir.lower import backend_of, lower

    backend = backend_of(inferred.backend_config)
    if backend.input_sharing == "qspec":
        return None
    return dump(lower(replace(backend, input_sharing="qspec")), fmt, name=name)


def _spec_quantizer(text: str, fmt: str) -> Callable[[], Any]:
    """A factory of the quantizer of ``text`` as a spec file loads it (the file round-trips)."""
    import backend_spec

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"spec.{fmt}"
        path.write_text(text, encoding="utf-8")
        backend_config = backend_spec.load(path)
    return functools.partial(backend_spec.quantizer, backend_config)


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


# --- the suite ----------------------------------------------------------------------------------

#: What the suite holds: the exported suite module, its branches, unit key -> op names, and
#: its example inputs.
Suite = tuple[Any, list[Any], dict[str, tuple[str, ...]], tuple]


@functools.cache
def probe_suite() -> Suite:
    """(exported suite module, its branches, unit key -> op names, inputs), built once per process.

    It is never cached on disk: an exported program is saved by ``torch.export.save`` and read
    back by ``torch.export.load``, which unpickles (and falls back to unrestricted unpickling
    when the safe load fails), so whoever could write the cache folder would run code in the
    next export. Loading it cost about as much as rebuilding it (docs/security.md)."""
    from backend_spec.export.quantizer import probe

    parts, unit_names = _parts()
    exported = probe.export_suite(parts)
    return exported.module(check_guards=False), parts.branches, unit_names, tuple(parts.inputs)
