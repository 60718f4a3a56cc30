"""Command-line glue of the pt2e flow (kept out of cli/app.py, which only calls in here)."""

from __future__ import annotations

from pathlib import Path

import typer

from backend_spec._torch import BackendConfig


def compile_pt2e(backend_config: BackendConfig, spec: Path, output: Path | None) -> None:
    """Print the rule table's report; with ``output``, write the standalone quantizer module."""
    from backend_spec.pt2e.rules import compile_table

    table, report = compile_table(backend_config)
    qat_table = compile_table(backend_config, qat=True)[0] if output is not None else None
    typer.echo(f"pt2e: {report.summary()}")
    for label, reason in report.skipped:
        typer.echo(f"  skipped {label}: {reason}")
    for label, first, chain in report.conflicts:
        typer.echo(f"  conflict {label} with {first} on {chain}")
    if output is not None:
        from backend_spec.files import write_atomic
        from backend_spec.pt2e.emit import generate_module

        write_atomic(output, generate_module(table, source=str(spec), qat_table=qat_table))
        typer.echo(f"wrote {output}")
