"""Lint several files with their settings and decide the outcome (what ``bespec lint`` runs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backend_spec.diagnostics import Diagnostic, Severity, SpecError
from backend_spec.lint import cache
from backend_spec.settings import LintSettings


@dataclass
class LintReport:
    """Every diagnostic of a run, and whether the run fails (errors, or warnings when strict)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: bool = False
    files: int = 0

    def count(self, severity: Severity) -> int:
        return sum(1 for d in self.diagnostics if d.severity is severity)

    def summary(self) -> str:
        errors, warnings = self.count(Severity.ERROR), self.count(Severity.WARNING)
        infos = self.count(Severity.INFO)
        files = f"{self.files} file{'s' if self.files != 1 else ''}"
        notes = f" ({infos} note{'s' if infos != 1 else ''})" if infos else ""
        if not errors and not warnings:
            return f"{files} checked, no problems{notes}."
        return (
            f"{errors} error{'s' if errors != 1 else ''}, "
            f"{warnings} warning{'s' if warnings != 1 else ''} in {files}{notes}."
        )


def _fails(severity: Severity, strict: bool) -> bool:
    """Errors fail a run; warnings too with --strict; notes never."""
    return severity is Severity.ERROR or (strict and severity is Severity.WARNING)


def lint_files(
    paths: Sequence[Path],
    settings: LintSettings = LintSettings(),
    allow_imports: Iterable[str] = (),
    *,
    use_cache: bool = True,
) -> LintReport:
    """Lint each file with one set of settings (the project's with the command line's on top:
    :func:`backend_spec.lint.settings.merged`); never settings found next to a spec.

    ``allow_imports`` is the allow-list of every file. A file linted before with the same
    bytes, base files, selection, bespec and torch is answered from :mod:`.cache`
    (``use_cache=False`` or ``BESPEC_NO_CACHE=1``: never). Raises ValueError on a selection that
    names no rule (the caller's misuse, not a spec problem).
    """
    report = LintReport(files=len(paths))
    allow_imports = tuple(allow_imports)
    selection = [f"select {settings.select}", f"ignore {settings.ignore}"]
    rules = None
    for path in paths:
        cached = use_cache and cache.enabled() and not allow_imports
        key = _cache_key(path, selection) if cached else None
        found = cache.lookup(key) if key else None
        if found is None:
            from backend_spec.compiler.loader import recording_reads
            from backend_spec.lint.registry import Selection, select_rules
            from backend_spec.lint.runner import lint_path

            chosen = Selection(settings.select, settings.ignore)
            if rules is None:
                rules = select_rules(chosen)
            explicit = [rule.id for rule in rules if chosen.named(rule)]
            with recording_reads() as reads:
                found = lint_path(path, rules, allow_imports, explicit)
            if key:
                cache.store(key, found, reads)
        report.diagnostics.extend(found)
        if any(_fails(d.severity, settings.strict) for d in found):
            report.failed = True
    return report


def _cache_key(path: Path, selection: list[str]) -> str | None:
    """The lint cache's key of ``path`` (None when unreadable: the linter reports why)."""
    from backend_spec.specfile.source import read_spec_bytes

    try:
        return cache.key(Path(path), read_spec_bytes(path), selection)
    except SpecError:
        return None


def sarif_rules() -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    """Short descriptions and SARIF metadata of every lint rule, for the SARIF driver."""
    from backend_spec.lint.registry import all_rules

    texts = {r.id: r.summary for r in all_rules()}
    metadata: dict[str, dict[str, object]] = {
        r.id: {
            "name": r.name,
            "helpUri": r.help_uri,
            "fullDescription": {"text": " ".join(r.doc.split())},
            "defaultConfiguration": {"level": r.severity.sarif_level},
        }
        for r in all_rules()
    }
    return texts, metadata
