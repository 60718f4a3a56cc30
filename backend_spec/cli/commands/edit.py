"""``diff`` and ``fmt``: comparing specs and formatting them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from backend_spec.cli.common import existing, load_ref
from backend_spec.cli.options import AllowImport, BackendArg, TextOrJson, app
from backend_spec.cli.render.streams import fail_usage, note, out, out_escaped


@app.command("diff")
def diff_command(
    a: BackendArg,
    b: BackendArg,
    fmt: TextOrJson = "text",
    allow_import: AllowImport = None,
    behaviour: Annotated[
        bool,
        typer.Option(
            "--behaviour",
            "--behavior",
            help="Compare what A and B do, not how they are written: quantize the pt2e probe "
            "suite and reference nets with both and list the ops that differ.",
        ),
    ] = False,
    flow: Annotated[
        str | None,
        typer.Option(
            help="With --behaviour: fx, pt2e or both (default: the flows the specs are "
            "written for: pt2e when both set pt2e keys, fx when neither does)."
        ),
    ] = None,
) -> None:
    """Show the patterns added, removed and changed from A to B (exit 1 when they differ);
    with --behaviour, whether they quantize alike."""
    from backend_spec.cli.render import diff as diffing

    if flow is not None and flow not in ("fx", "pt2e", "both"):
        raise fail_usage(f"--flow must be fx, pt2e or both, not {flow!r}")
    if flow is not None and not behaviour:
        raise fail_usage("--flow applies to --behaviour")
    old, new = (load_ref(ref, allow_import, spec_errors_exit=2).backend_config for ref in (a, b))
    if behaviour:
        raise typer.Exit(_behaviour(old, new, a, b, flow, fmt))
    differences = diffing.diff_configs(old, new)
    if fmt == "json":
        out(diffing.render_json(differences))
    else:
        out_escaped(diffing.render_text(differences, a, b))
    raise typer.Exit(1 if differences else 0)


def _behaviour(old: Any, new: Any, a: str, b: str, flow: str | None, fmt: str) -> int:
    """``diff --behaviour``: the comparison rendered; 0 identical, 1 different."""
    from backend_spec.cli.render import diff as diffing
    from backend_spec.export.behaviour import FLOWS, compare_behaviour, flows_in_play

    flows = flows_in_play(old, new) if flow is None else FLOWS if flow == "both" else (flow,)
    if flow is None and flows != FLOWS:
        other = "FX" if flows == ("pt2e",) else "pt2e"
        why = "both specs set pt2e keys" if other == "FX" else "neither spec sets a pt2e key"
        note(f"{other} not compared ({why}); --flow both compares it too")
    if "pt2e" in flows:
        from backend_spec.pt2e import TorchaoMissing, require_torchao

        try:
            require_torchao()
        except TorchaoMissing as exc:
            raise fail_usage(f"{exc} (or compare FX only: --flow fx)") from None
    result = compare_behaviour(old, new, flows)
    if fmt == "json":
        out(diffing.behaviour_json(result))
    else:
        out_escaped(diffing.behaviour_text(result, a, b))
    return 0 if result.identical else 1


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
