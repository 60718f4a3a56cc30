"""``check``: quantize per-pattern cases and models on the host CPU, FX or pt2e."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend_spec.cli.common import (
    allowed,
    check_output_path,
    existing,
    load_ref,
    model_factories,
    project,
    refuse_flags,
)
from backend_spec.cli.options import AllowImport, BackendArg, TextOrJson, app
from backend_spec.cli.render.streams import fail_usage, note, out


@app.command("check")
def check_cli(
    spec: BackendArg,
    engine: Annotated[
        str | None,
        typer.Option(
            help="Quantized engine (default: the backend's own, [tool.bespec.check] engine, "
            "else x86, fbgemm or qnnpack)."
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Parallel worker processes (at most one per CPU and per case).",
        ),
    ] = 1,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            help="A zoo or pt2e reference model by name, module:factory or file.py:factory "
            "returning (model, example_inputs); repeatable; replaces the default models "
            "(the zoo; with --flow pt2e|both, the zoo and the pt2e reference nets).",
        ),
    ] = None,
    golden: Annotated[
        Path | None, typer.Option(help="Compare with this stored result; exit 1 on drift.")
    ] = None,
    update_golden: Annotated[
        bool, typer.Option("--update-golden", help="Record the result to --golden (exit 0).")
    ] = False,
    fmt: TextOrJson = "text",
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="List every case, with torch's full errors.")
    ] = False,
    allow_import: AllowImport = None,
    flow: Annotated[
        str, typer.Option(help="fx (default), pt2e, or both: compare FX with pt2e.")
    ] = "fx",
    qat: Annotated[
        bool,
        typer.Option("--qat", help="With --flow pt2e|both: train (prepare_qat_pt2e / _fx)."),
    ] = False,
) -> None:
    """Quantize a minimal model per pattern and DTypeConfig, and the zoo models, on the host CPU.

    Exit status: with --golden, 0 when the run matches the golden (known failures included) and
    1 on drift; without one, 1 when a case or model failed; --update-golden only records (0).
    """
    if flow not in ("fx", "pt2e", "both"):
        raise fail_usage(f"--flow must be fx, pt2e or both, not {flow!r}")
    models = model_factories(model)
    if flow != "fx":
        fx_only = {
            "--jobs": jobs != 1,
            "--golden": golden is not None,
            "--update-golden": update_golden,
        }
        refuse_flags(f"--flow {flow}", [flag for flag, given in fx_only.items() if given])
        raise typer.Exit(
            pt2e_check(spec, flow, models, fmt, allow_import, engine, qat=qat, verbose=verbose)
        )
    if qat:
        raise fail_usage(
            "--qat applies to --flow pt2e or both (the FX check already runs QAT cases)"
        )
    from backend_spec.check import golden as golden_files
    from backend_spec.check.run import run_check
    from backend_spec.cli.render import check as render

    if update_golden and golden is None:
        raise fail_usage("--update-golden needs --golden FILE")
    if update_golden:
        check_output_path(golden)
    recorded = None
    if golden is not None and not update_golden:
        try:
            recorded = golden_files.read_golden(existing(golden))
        except ValueError as exc:
            raise fail_usage(str(exc)) from None
    backend_config = load_ref(spec, allow_import).backend_config
    engine = engine or project().check.engine
    with render.progress_bar() as advance:
        try:
            report = run_check(
                spec,
                engine=engine,
                models=models,
                jobs=jobs,
                progress=advance,
                allow_imports=allowed(allow_import),
                backend_config=backend_config,
            )
        except ValueError as exc:  # an engine this torch does not have
            raise fail_usage(str(exc)) from None
    drift = golden_files.compare_to_golden(report, recorded) if recorded is not None else None
    if fmt == "json":
        out(render.to_json_text(report, drift, verbose=True) + "\n")
    else:
        render.print_text(report, drift, verbose=verbose)
    if update_golden:
        assert golden is not None
        golden_files.write_golden(report, golden)
        note(render.golden_line(report, golden, written=True))
        raise typer.Exit(0)
    if recorded is not None:
        assert golden is not None
        if (drifted := golden_files.torch_note(recorded)) is not None:
            from backend_spec.cli.render.console import escape

            note(f"note: {escape(drifted)}")
        if not drift:
            note(render.golden_line(report, golden, written=False))
        raise typer.Exit(1 if drift else 0)
    raise typer.Exit(1 if report.failed else 0)


def pt2e_check(
    spec: str,
    flow: str,
    models: list | None,
    fmt: str,
    allow_import: list[str] | None,
    engine: str | None,
    *,
    qat: bool = False,
    verbose: bool = False,
) -> int:
    """``check --flow pt2e|both`` (backend_spec.pt2e.check): the rows rendered, exit status.
    ``models``: (name, factory) pairs of ``--model``, None for the default models."""
    from backend_spec.check.run import check_engine
    from backend_spec.cli.render.pt2e import flow_json, flow_text
    from backend_spec.pt2e import TorchaoMissing
    from backend_spec.pt2e.check import flow_check, reference_models

    backend_config = load_ref(spec, allow_import).backend_config
    try:
        engine = check_engine(spec, backend_config, engine or project().check.engine)
        chosen = dict(models) if models is not None else reference_models()
        report = flow_check(backend_config, flow, chosen, engine=engine, qat=qat)
    except TorchaoMissing as exc:
        raise fail_usage(str(exc)) from None
    except ValueError as exc:  # an engine this torch does not have
        raise fail_usage(str(exc)) from None
    out(flow_json(report) if fmt == "json" else flow_text(report, verbose=verbose))
    return 1 if report.failed else 0
