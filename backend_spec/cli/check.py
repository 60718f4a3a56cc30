"""``bespec check``: the function the CLI calls, returning the exit status.

0 when nothing failed (and nothing drifted from the golden), 1 otherwise, 2 when the command
itself was misused (no such spec, unknown engine, bad ``module:factory``). A bad spec prints its
diagnostics, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rich.console import Console

from backend_spec.check import golden as golden_files
from backend_spec.check.run import resolve_models, run_check
from backend_spec.cli.render.check import print_text, progress_bar, to_json_text
from backend_spec.cli.render.console import make_console
from backend_spec.diagnostics import SpecError


def check_command(
    spec_or_builtin: str,
    engine: str | None = None,
    jobs: int = 1,
    models: Sequence[str] | None = None,
    golden: str | None = None,
    update_golden: bool = False,
    fmt: str = "text",
    allow_imports: Sequence[str] = (),
) -> int:
    """Run the check and print it; ``models`` adds ``module:factory`` models to the zoo."""
    err = Console(stderr=True)
    problem = _misuse(fmt, golden, update_golden)
    if problem:
        err.print(f"bespec check: {problem}", highlight=False, markup=False)
        return 2
    try:
        model_list = resolve_models([*_zoo_names(), *(models or ())])
    except (ImportError, AttributeError, ValueError) as exc:
        err.print(f"bespec check: bad --model: {exc}", highlight=False, markup=False)
        return 2
    try:
        with progress_bar(_item_count(spec_or_builtin, allow_imports, model_list)) as advance:
            report = run_check(
                spec_or_builtin,
                engine=engine,
                models=model_list,
                jobs=max(1, jobs),
                progress=advance,
                allow_imports=allow_imports,
            )
    except SpecError as exc:
        for diagnostic in exc.diagnostics:
            err.print(str(diagnostic), highlight=False, markup=False)  # str() escapes
        return 1
    except ValueError as exc:  # an unusable backend reference or an unsupported engine
        err.print(f"bespec check: {exc}", highlight=False, markup=False)
        return 2
    drift = _golden_step(report, golden, update_golden, err)
    if fmt == "json":
        sys.stdout.write(to_json_text(report, drift) + "\n")
    else:
        print_text(report, make_console(), drift)
    return 1 if report.failed or drift else 0


def _misuse(fmt: str, golden: str | None, update_golden: bool) -> str:
    if fmt not in ("text", "json"):
        return f"unknown format {fmt!r} (text or json)"
    if update_golden and not golden:
        return "--update-golden needs --golden FILE"
    if golden and not update_golden and not os.path.isfile(golden):
        return f"no such golden file: {golden} (create it with --update-golden)"
    if golden and update_golden:
        from backend_spec.files import WriteError, ensure_writable

        try:
            ensure_writable(golden)
        except WriteError as exc:
            return str(exc)
    return ""


def _zoo_names() -> list[str]:
    from backend_spec.check import zoo

    return list(zoo.MODELS)


def _item_count(spec: str, allow_imports: Sequence[str], models: list) -> int:
    """Patterns with DTypeConfigs plus models: the progress bar's total."""
    from backend_spec.check.parallel import BackendSource

    source = BackendSource.of(spec, allow_imports)
    try:
        backend_config = source.build() if source else None
    except (SpecError, ValueError):  # run_check reports it
        return len(models)
    patterns = sum(1 for c in backend_config.configs if c.dtype_configs) if backend_config else 0
    return patterns + len(models)


def _golden_step(report, golden: str | None, update: bool, err: Console) -> list[str]:
    if not golden:
        return []
    if update:
        golden_files.write_golden(report, golden)  # path vetted by _misuse
        err.print(f"wrote golden {golden}", highlight=False, markup=False)
        return []
    return golden_files.compare_to_golden(report, golden_files.read_golden(golden))
