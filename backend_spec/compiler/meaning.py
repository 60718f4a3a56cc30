"""The checks ``load`` and ``compile`` enforce: a file that does not mean what it says is an
error, not a warning. An entry that a later entry with the same pattern silently replaces
(BS501), and a fuser that cannot be called with one module per op of its pattern (BS511).

They live with the compiler, below the linter, so the loader never imports a consumer of it.
``bespec lint`` reports the same findings through its rule modules
(:mod:`backend_spec.lint.rules.duplicate_pattern`, :mod:`~backend_spec.lint.rules.fuser_arity`),
which hold their long documentation and point their ``check`` here.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator

from backend_spec import codes
from backend_spec.codes import Code, Severity
from backend_spec.compiler.view import PatternEntry, Problem, SpecView
from backend_spec.diagnostics import Diagnostic


def duplicate_patterns(view: SpecView) -> Iterator[Problem]:
    """Entries a later entry with the same pattern (after resolution) replaces."""
    groups: dict[object, list[PatternEntry]] = {}
    for entry in view.entries:
        if entry.key is not None:
            groups.setdefault(entry.key, []).append(entry)
    for entries in groups.values():
        last = entries[-1]
        line = view.doc.where(last.path)[0]
        for entry in entries[:-1]:
            same_text = entry.model.pattern == last.model.pattern and (
                entry.model.pattern_complex_format == last.model.pattern_complex_format
            )
            how = "" if same_text else " (the same ops under other names)"
            yield Problem(
                entry.pattern_path,
                f"pattern {entry.label} is given again at line {line}{how}; "
                "BackendConfig keeps only the last entry, so this one has no effect",
                "merge the two entries into one",
            )


def fuser_arity(view: SpecView) -> Iterator[Problem]:
    """Named fusers that cannot be called as ``fuser(is_qat, m1[, m2[, m3]])``."""
    for entry in view.entries:
        fuser_name = entry.model.fuser_method
        if not isinstance(fuser_name, str) or entry.ops is None:
            continue
        fuser = entry.name("fuser_method")
        try:
            signature = inspect.signature(fuser)
        except (TypeError, ValueError):  # a builtin without a signature: cannot tell
            continue
        arity = len(entry.ops)
        try:
            signature.bind(False, *([None] * arity))
        except TypeError:
            yield Problem(
                (*entry.path, "fuser_method"),
                f"fuser {fuser_name}{signature} cannot be called with is_qat and {arity} "
                f"module{'s' if arity != 1 else ''}, one per op of the pattern",
                "use a fuser for this many ops, or {sequential: FusedModuleClass}",
            )


#: The enforced checks, by the code they report under.
ENFORCED: dict[Code, Callable[[SpecView], Iterator[Problem]]] = {
    codes.DUPLICATE_PATTERN: duplicate_patterns,
    codes.FUSER_ARITY: fuser_arity,
}


def meaning_errors(view: SpecView) -> list[Diagnostic]:
    """Every enforced check's findings on a validated spec, as errors."""
    return [
        dataclasses.replace(view.diagnostic(code, problem), severity=Severity.ERROR)
        for code, check in ENFORCED.items()
        for problem in check(view)
    ]
