"""A compiled spec as its checks see it: the parsed source (for positions), the validated
model, each pattern entry with its ops and every other name as the compiler resolved them
(once, also for a spec that did not compile: :class:`~backend_spec.compiler.compiler.
Resolved`), and the intermediate form and BackendConfig when the spec compiled.

It lives with the compiler, below both of its consumers: the checks the compiler enforces
(:mod:`backend_spec.compiler.meaning`) and the lint rules (:class:`backend_spec.lint.context.
LintContext` extends it) read the same view. A check never raises on a name that does not
resolve: the loader already reports those, so a check skips what it cannot see (``None`` from
:meth:`PatternEntry.name` or :meth:`SpecView.name`). No check resolves a name again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from backend_spec import _torch
from backend_spec.compiler.compiler import Compiled, Resolved, usable
from backend_spec.diagnostics import Diagnostic
from backend_spec.ir import Backend
from backend_spec.names.labels import pattern_label
from backend_spec.specfile.models import PatternModel, SpecModel
from backend_spec.specfile.source import KeyPath, Position, SourceDoc


@dataclass(frozen=True)
class Problem:
    """One finding of a check: where (a key path of the spec) and what, before positions."""

    path: KeyPath
    message: str
    hint: str | None = None  # None: the code's hint
    at_key: bool = False
    #: Where it is, for a finding about the text rather than a key (a comment).
    position: Position | None = None


@dataclass(frozen=True)
class PatternEntry:
    """One entry of ``patterns`` with its ops resolved.

    ``ops`` is the forward-order tuple of a ``pattern`` (one to three ops), or None when the
    entry uses ``pattern_complex_format`` or a name did not resolve. ``key`` is the key torch
    stores the entry under (None when a name did not resolve). ``resolved`` is the
    compiler's resolution of the entry's names (none when it was not compiled).
    """

    index: int
    model: PatternModel
    ops: tuple[Any, ...] | None
    key: Any
    resolved: Resolved | None = field(default=None, repr=False)

    def name(self, *path: str | int) -> Any:
        """The object the compiler resolved the name at ``path`` inside the entry to
        (``entry.name("fuser_method", "sequential")``); None when it is not set or did not
        resolve."""
        return self.resolved.name(*path) if self.resolved is not None else None

    @property
    def path(self) -> KeyPath:
        return ("patterns", self.index)

    @property
    def pattern_path(self) -> KeyPath:
        field = "pattern" if self.model.pattern is not None else "pattern_complex_format"
        return (*self.path, field)

    @property
    def label(self) -> str:
        """The pattern as a spec writes it: ``nn.Linear`` or ``(nn.Conv2d, nn.ReLU)``."""
        if self.ops is not None:
            return pattern_label(self.single if len(self.ops) == 1 else self.ops)
        if isinstance(self.model.pattern, list):  # nested items: as written, forward order
            return _as_written(self.model.pattern)
        text = pattern_label(self.key) if self.key is not None else "?"
        return f"{text} (complex format)" if self.model.pattern_complex_format is not None else text

    @property
    def single(self) -> Any:
        """The op of a one-op pattern, else None."""
        return self.ops[0] if self.ops is not None and len(self.ops) == 1 else None

    @property
    def root_op(self) -> Any:
        """The op torch's default root node getter picks: the first one in forward order."""
        return self.ops[0] if self.ops else None


def _as_written(pattern: Any) -> str:
    """A spec's pattern value as text, nested lists as tuples (``(nn.ReLU, (nn.BatchNorm2d,
    nn.Conv2d))``)."""
    if isinstance(pattern, list):
        return "(" + ", ".join(_as_written(p) for p in pattern) + ")"
    return str(pattern)


class SpecView:
    """One spec file, resolved: what every check of it may look at."""

    def __init__(
        self,
        doc: SourceDoc,
        spec: SpecModel,
        resolved: dict[int, Resolved],
        names: Mapping[KeyPath, Any],
        compiled: Compiled | None = None,
    ):
        self.doc = doc
        self.spec = spec
        #: The compiler's resolution of each pattern entry, by index.
        self.resolved = resolved
        #: The compiler's resolution of the names outside pattern entries (``remove``).
        self.names = names
        #: The spec compiled (with ``extends`` applied), or None if it did not compile.
        self.compiled = compiled

    @property
    def backend_config(self) -> _torch.BackendConfig | None:
        """The torch config of the compiled spec (lowered when first asked; None if it did not
        compile)."""
        return self.compiled.backend_config if self.compiled is not None else None

    @property
    def backend(self) -> Backend | None:
        """The intermediate form of the compiled spec (None if it did not compile)."""
        return self.compiled.backend if self.compiled is not None else None

    # -- names ------------------------------------------------------------------------------

    def name(self, *path: str | int) -> Any:
        """The object the compiler resolved the name at ``path`` (outside pattern entries:
        ``"remove", 0``) to; None when it did not resolve."""
        return usable(self.names.get(path))

    # -- patterns ---------------------------------------------------------------------------

    @cached_property
    def entries(self) -> list[PatternEntry]:
        return [self._entry(i, model) for i, model in self.spec.numbered_patterns()]

    def _entry(self, index: int, model: PatternModel) -> PatternEntry:
        resolved = self.resolved.get(index)
        if resolved is None:  # not compiled (the spec failed before its patterns)
            return PatternEntry(index, model, None, None)
        return PatternEntry(index, model, resolved.ops, resolved.key, resolved)

    def diagnostic(self, code: str, problem: Problem) -> Diagnostic:
        """``problem`` placed in the file, under ``code``."""
        if problem.position is not None:
            line, column = problem.position
            return Diagnostic(self.doc.file, line, column, code, problem.message, problem.hint)
        return self.doc.diagnostic(
            problem.path, code, problem.message, problem.hint, at_key=problem.at_key
        )
