"""What a lint rule sees: the compiler's view of one spec file
(:class:`~backend_spec.compiler.view.SpecView`) plus the questions only rules ask (dtype
config uses, what the whole backend quantizes).

Rules never raise on names that do not resolve: the loader already reports those, so a rule
just skips what it cannot see (``None`` from :meth:`PatternEntry.name`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from backend_spec.compiler.view import PatternEntry, Problem, SpecView
from backend_spec.lint.noqa import Suppressions
from backend_spec.specfile.models import DTypeConfigModel
from backend_spec.specfile.source import KeyPath

__all__ = ["DTypeUse", "LintContext", "PatternEntry", "Problem"]


@dataclass(frozen=True)
class DTypeUse:
    """A dtype config as one pattern uses it: where the reference is, and where it is defined."""

    ref_path: KeyPath
    definition_path: KeyPath
    model: DTypeConfigModel


class LintContext(SpecView):
    """Everything a rule may look at for one spec file."""

    #: The codes of the rules the user selected by name (``--select``, ``select`` in the
    #: project's settings), not just left on: a rule that sums its findings up lists them.
    explicit: frozenset[str] = frozenset()

    @cached_property
    def noqa(self) -> Suppressions:
        """The file's suppression comments (read once, when first asked)."""
        return Suppressions.of(self.doc)

    # -- dtype configs ----------------------------------------------------------------------

    def dtype_uses(self, entry: PatternEntry) -> Iterator[DTypeUse]:
        """The dtype configs of a pattern entry (named ones looked up; unknown names skipped)."""
        for j, ref in enumerate(entry.model.dtype_configs):
            ref_path = (*entry.path, "dtype_configs", j)
            if isinstance(ref, str):
                model = self.spec.dtype_configs.get(ref)
                if model is not None:
                    yield DTypeUse(ref_path, ("dtype_configs", ref), model)
            else:
                yield DTypeUse(ref_path, ref_path, ref)

    def dtype_definitions(self) -> Iterator[tuple[KeyPath, DTypeConfigModel]]:
        """Every dtype config written in the file once: the named ones, then the inline ones."""
        for name, model in self.spec.dtype_configs.items():
            yield ("dtype_configs", name), model
        for entry in self.entries:
            for j, ref in enumerate(entry.model.dtype_configs):
                if not isinstance(ref, str):
                    yield (*entry.path, "dtype_configs", j), ref

    # -- the whole backend ------------------------------------------------------------------
    # Questions about the backend as torch will see it: answered from the intermediate form
    # (with ``extends`` applied) when the spec compiled, else from this file's own entries.

    @cached_property
    def quantized_ops(self) -> set[Any]:
        """Single-op patterns that have dtype configs, i.e. ops the backend quantizes."""
        if self.backend is not None:
            return set(self.backend.quantized_ops)
        return {e.single for e in self.entries if e.single is not None and e.model.dtype_configs}

    @cached_property
    def reference_roots(self) -> set[Any]:
        """Root modules some pattern maps to a reference quantized module (torch merges this
        mapping over all patterns, so one entry per root module suffices)."""
        if self.backend is not None:
            return set(self.backend.reference_roots)
        return {
            e.name("root_module")
            for e in self.entries
            if e.model.root_module and e.model.reference_quantized_module
        }
