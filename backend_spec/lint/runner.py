"""Lint one spec file: the loader's diagnostics (always errors) plus the selected rules.

The loader runs first and its problems are reported as they are; the rules then run on the
validated model whenever the file parses and validates, even if names failed to resolve, so a
user sees every problem in one pass. A rule that crashes becomes a diagnostic, not a traceback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from backend_spec import _torch, codes
from backend_spec.build.loader import compile_file, read_source
from backend_spec.diagnostics import Diagnostic, SpecError
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.registry import Rule, all_rules
from backend_spec.names.resolver import Resolver
from backend_spec.spec.validate import validate

#: Code of a rule that failed on unexpected input (a bug in bespec, reported like a problem).
RULE_CRASHED = codes.RULE_CRASHED


def lint_path(
    path: str | Path,
    rules: Iterable[Rule] | None = None,
    allow_imports: Iterable[str] = (),
) -> list[Diagnostic]:
    """Every problem of one spec file, in file order."""
    path = Path(path)
    allow = tuple(allow_imports)
    rules = all_rules() if rules is None else tuple(rules)
    with _torch.quiet():
        found, backend_config = _loader_problems(path, allow)
        context = _context(path, allow, backend_config)
        if context is not None:
            for rule in rules:
                found.extend(run_rule(rule, context))
    return _ordered(found)


def _loader_problems(path: Path, allow: tuple[str, ...]) -> tuple[list[Diagnostic], object]:
    try:
        return [], compile_file(path, allow).backend_config
    except SpecError as error:
        return list(error.diagnostics), None


def _context(path: Path, allow: tuple[str, ...], backend_config: object) -> LintContext | None:
    """The rules' view of the file, or None when it does not even validate."""
    try:
        doc = read_source(path)
    except SpecError:
        return None
    spec, _ = validate(doc)
    if spec is None:
        return None
    return LintContext(doc, spec, Resolver(allow), backend_config)


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
                "please report this with the spec that caused it",
            )
        ]


def diagnostic(rule: Rule, context: LintContext, problem: Problem) -> Diagnostic:
    found = context.doc.diagnostic(
        problem.path, rule.id, problem.message, problem.hint, at_key=problem.at_key
    )
    return dataclasses.replace(found, severity=rule.severity)


def _ordered(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    unique = list(dict.fromkeys(diagnostics))
    return sorted(unique, key=lambda d: (d.file, d.line, d.column, d.code))
