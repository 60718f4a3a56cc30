"""The rule registry: every module of :mod:`backend_spec.lint.rules` is one rule.

A rule module defines ``CODE`` (its entry in :mod:`backend_spec.codes`, which holds the stable
id users put in ``--ignore``, the slug, the severity and the one-line summary), a docstring that
explains the rule at length (``docs/rules.md`` is generated from both), and ``check(context)``
yielding :class:`~backend_spec.lint.context.Problem`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

from backend_spec.diagnostics import Severity
from backend_spec.lint.context import LintContext, Problem

#: Where each rule's section of docs/rules.md lives (SARIF helpUri, JSON ``url``).
RULES_DOC = "https://github.com/bespec/bespec/blob/main/docs/rules.md"


@dataclass(frozen=True)
class Rule:
    """A lint rule, as read from its module."""

    id: str
    name: str
    severity: Severity
    summary: str
    doc: str
    check: Callable[[LintContext], Iterator[Problem]] = field(repr=False, compare=False)

    @property
    def help_uri(self) -> str:
        return f"{RULES_DOC}#{self.id.lower()}-{self.name}"

    def matches(self, token: str) -> bool:
        """A ``--select``/``--ignore`` token names this rule: a code or slug, or a prefix."""
        token = token.strip()
        return bool(token) and (
            self.id.upper().startswith(token.upper()) or self.name.startswith(token.lower())
        )


def _rule_of(module: ModuleType) -> Rule:
    code = module.CODE
    return Rule(
        id=code.id,
        name=code.slug,
        severity=code.severity,
        summary=code.summary,
        doc=(module.__doc__ or "").strip(),
        check=module.check,
    )


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule, ordered by code."""
    from backend_spec.lint import rules as package

    modules = [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    ]
    found = sorted((_rule_of(m) for m in modules), key=lambda r: r.id)
    codes = [r.id for r in found]
    if len(set(codes)) != len(codes):  # pragma: no cover - a development mistake
        raise RuntimeError(f"duplicate lint rule codes: {codes}")
    return tuple(found)


@dataclass(frozen=True)
class Selection:
    """Which rules run: those matching ``select`` (all when empty) and not ``ignore``."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def unknown(self) -> list[str]:
        """Tokens that name no rule (a typo in ``--select BS5O1`` must not pass silently)."""
        rules = all_rules()
        return [t for t in (*self.select, *self.ignore) if not any(r.matches(t) for r in rules)]

    def named(self, rule: Rule) -> bool:
        """Whether ``select`` names the rule (a code, a slug or a prefix), rather than
        leaving every rule on."""
        return any(rule.matches(t) for t in self.select)

    def enabled(self, rule: Rule) -> bool:
        chosen = not self.select or any(rule.matches(t) for t in self.select)
        return chosen and not any(rule.matches(t) for t in self.ignore)


def select_rules(selection: Selection, rules: Iterable[Rule] | None = None) -> list[Rule]:
    """The rules a selection enables; ValueError if it names a rule that does not exist."""
    unknown = selection.unknown()
    if unknown:
        known = ", ".join(f"{r.id} ({r.name})" for r in all_rules())
        raise ValueError(f"unknown lint rule {', '.join(map(repr, unknown))}; rules: {known}")
    return [r for r in (rules or all_rules()) if selection.enabled(r)]
