"""``diff`` and ``fmt``: comparing specs and formatting them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend_spec.cli.common import existing, load_ref
from backend_spec.cli.options import AllowImport, BackendArg, TextOrJson, app
from backend_spec.cli.render.streams import note, out, out_escaped


@app.command("diff")
def diff_command(
    a: BackendArg,
    b: BackendArg,
    fmt: TextOrJson = "text",
    allow_import: AllowImport = None,
) -> None:
    """Show the patterns added, removed and changed from A to B (exit 1 when they differ)."""
    from backend_spec.cli.render import diff as diffing

    old, new = (load_ref(ref, allow_import, spec_errors_exit=2).backend_config for ref in (a, b))
    differences = diffing.diff_configs(old, new)
    if fmt == "json":
        out(diffing.render_json(differences))
    else:
        out_escaped(diffing.render_text(differences, a, b))
    raise typer.Exit(1 if differences else 0)


@app.command("fmt")
def fmt_command(
    specs: Annotated[list[Path], typer.Argument(help="Spec files to format in place.")],
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if a file would change.")
    ] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Print a unified diff of each change to stdout.")
    ] = False,
) -> None:
    """Rewrite YAML and TOML specs in the canonical key order and layout, comments kept."""
    from backend_spec.cli.render.console import escape
    from backend_spec.files import WriteError
    from backend_spec.specfile.fmt import FormatError, format_path

    failed = False
    for spec in specs:
        try:
            outcome = format_path(existing(spec), check=check)
        except (FormatError, WriteError) as exc:
            found = getattr(exc, "diagnostic", None)  # file:line:col: CODE message
            note(str(found) if found else escape(f"{spec}: {exc}"))
            failed = True
            continue
        if outcome.changed:
            if diff:
                out_escaped(outcome.diff())
            note(escape(f"{'would reformat' if check else 'reformatted'} {spec}"))
            failed = failed or check
    raise typer.Exit(1 if failed else 0)
