"""Lint one spec file: the loader's diagnostics (always errors) plus the selected rules.

The file is read and validated once. The rules' findings pass through the file's ``# noqa``
comments (:mod:`backend_spec.lint.noqa`); the loader's errors and the enforced checks' never
do. Validation recovers from bad entries (they are reported
and set aside), and the rules run on every entry that validated, even if names failed to
resolve, so a user sees every problem in one pass. A rule that crashes becomes a diagnostic,
not a traceback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from backend_spec import _torch, codes
from backend_spec.compiler.compiler import Compiled
from backend_spec.compiler.loader import Built, build, guarded, read_source, view_of
from backend_spec.compiler.meaning import ENFORCED, meaning_errors
from backend_spec.diagnostics import Diagnostic, Severity, SpecError, capped
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.noqa import RULES as NOQA_RULES
from backend_spec.lint.registry import Rule, all_rules
from backend_spec.names.resolver import Resolver

#: Code of a rule that failed on unexpected input (a bug in bespec, reported like a problem).
RULE_CRASHED = codes.RULE_CRASHED


def lint_path(
    path: str | Path,
    rules: Iterable[Rule] | None = None,
    allow_imports: Iterable[str] = (),
    explicit: Iterable[str] = (),
) -> list[Diagnostic]:
    """Every problem of one spec file, in file order, from one read and one validation.
    ``explicit``: the codes of the rules the user selected by name
    (:attr:`LintContext.explicit`)."""
    rules = all_rules() if rules is None else tuple(rules)
    with _torch.quiet():
        try:
            context, built = _context(Path(path), allow_imports)
        except SpecError as error:
            return _ordered(list(error.diagnostics))
        found = list(built.diagnostics)
        if context is not None:
            context.explicit = frozenset(explicit)
            found.extend(_findings(context, rules))
    return _ordered(found)


def compile_report(
    path: str | Path,
    allow_imports: Iterable[str] = (),
    rules: Iterable[Rule] | None = None,
    *,
    allow_extends_outside: bool = False,
) -> tuple[Compiled | None, list[Diagnostic]]:
    """What ``bespec compile`` reports, from one read: the compiled spec (None when there is
    any error), and every diagnostic: the loader's errors, the enforced checks' findings
    (:mod:`backend_spec.compiler.meaning`) as errors, the other rules' findings as warnings
    (notes stay notes: ``compile`` hides them)."""
    with _torch.quiet():
        try:
            context, built = _context(Path(path), allow_imports, allow_extends_outside)
        except SpecError as error:
            return None, _ordered(list(error.diagnostics))
        errors = list(built.diagnostics)
        warnings: list[Diagnostic] = []
        if context is not None:
            errors += meaning_errors(context)
            chosen = all_rules() if rules is None else rules
            found = _findings(context, [r for r in chosen if r.id not in ENFORCED])
            # Split by severity, never by membership in a list: findings can be many.
            notes = [d for d in found if d.severity is Severity.INFO]
            problems = [d for d in found if d.severity is not Severity.INFO]
            warnings = notes + _as(Severity.WARNING, problems)
    compiled = None if errors else built.compiled
    return compiled, _ordered([*errors, *warnings])


def _context(
    path: Path, allow_imports: Iterable[str], extends_outside: bool = False
) -> tuple[LintContext | None, Built]:
    """Read, validate and compile a file once; the rules' view of it (None when it is not
    even a mapping). SpecError when it cannot be read or parsed. ``extends`` stays inside the
    file's folder unless ``extends_outside`` (docs/security.md)."""
    resolver = Resolver(tuple(allow_imports))
    doc = read_source(path)
    root = None if extends_outside else "base_dir"
    built = guarded(
        lambda: build(doc, resolver, path.parent, (path.resolve(),), root=root), str(path)
    )
    if built.spec is None:
        return None, built
    return view_of(built, LintContext), built


def _as(severity: Severity, found: list[Diagnostic]) -> list[Diagnostic]:
    return [dataclasses.replace(d, severity=severity) for d in found]


def _findings(context: LintContext, rules: Iterable[Rule]) -> list[Diagnostic]:
    """The rules' findings that the file's ``# noqa`` comments do not silence, then the
    comments' own problems: their rules run last, on what the others found."""
    rules = tuple(rules)
    ordinary = [rule for rule in rules if rule.id not in NOQA_RULES]
    found = [d for rule in ordinary for d in run_rule(rule, context)]
    kept = context.noqa.apply(found, (rule.id for rule in ordinary), _silenceable())
    for rule in rules:
        if rule.id in NOQA_RULES:
            kept.extend(run_rule(rule, context))
    return kept


@cache
def _silenceable() -> frozenset[str]:
    """The codes a ``# noqa`` comment may silence: every rule's, but the enforced checks' and
    those about the comments themselves."""
    return frozenset(rule.id for rule in all_rules()) - {*ENFORCED, *NOQA_RULES}


def run_rule(rule: Rule, context: LintContext) -> list[Diagnostic]:
    """One rule's problems as diagnostics with positions and the rule's severity."""
    try:
        return [diagnostic(rule, context, p) for p in rule.check(context)]
    except Exception as exc:  # a rule bug must not hide the other rules' findings
        return [
            Diagnostic(
                context.doc.file,
                1,
                1,
                RULE_CRASHED,
                f"rule {rule.id} ({rule.name}) failed: {type(exc).__name__}: {exc}",
            )
        ]


def diagnostic(rule: Rule, context: LintContext, problem: Problem) -> Diagnostic:
    return context.diagnostic(rule.id, problem)  # the rule's severity: its code's


def _ordered(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Unique, in file order, and capped (errors kept first) like the loader's own list."""
    unique = list(dict.fromkeys(diagnostics))
    return capped(sorted(unique, key=lambda d: (d.file, d.line, d.column, d.code)))
