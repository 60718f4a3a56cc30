"""``check``: quantize per-pattern cases and models on the host CPU, FX or pt2e."""

from __future__ import annotations

from dataclasses import dataclass
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
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Parallel worker processes (at most one per CPU and per case; default 1, "
            "with --lower one per CPU).",
        ),
    ] = None,
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
    lower: Annotated[
        str | None,
        typer.Option(
            "--lower",
            help="xnnpack or inductor: lower each pt2e-quantized model (ExecuTorch's XNNPACK "
            "delegate, or x86 inductor) and check every quantized op reaches an int8 kernel.",
        ),
    ] = None,
) -> None:
    """Quantize a minimal model per pattern and DTypeConfig, and the zoo models, on the host CPU.

    Exit status: with --golden, 0 when the run matches the golden (known failures included) and
    1 on drift; without one, 1 when a case or model failed; --update-golden only records (0).
    """
    if flow not in ("fx", "pt2e", "both"):
        raise fail_usage(f"--flow must be fx, pt2e or both, not {flow!r}")
    if lower is not None:
        given = {"--engine": engine is not None, "--qat": qat, "--flow both": flow == "both"}
        if refused := [flag for flag, on in given.items() if on]:
            raise fail_usage(
                f"--lower {lower} does not take {', '.join(refused)}: it lowers the pt2e "
                "flow's post-training quantization"
            )
        options = LowerOptions(jobs, golden, update_golden, fmt, verbose, allow_import)
        raise typer.Exit(lower_command(spec, lower, model or [], options))
    models = model_factories(model)
    if flow != "fx":
        fx_only = {
            "--jobs": jobs is not None,
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
                jobs=jobs or 1,
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


def _lower_models(refs: list[str]) -> list[str] | None:
    """Zoo models and pt2e reference nets by name; ``module:factory`` references checked
    importable here (workers import them again)."""
    from backend_spec.check.run import import_factory
    from backend_spec.lower.run import default_models

    known = set(default_models())
    for ref in refs:
        if ref not in known:
            try:
                import_factory(ref)
            except ValueError as exc:
                raise fail_usage(f"--model {ref}: {exc}") from None
    return list(dict.fromkeys(refs)) or None


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


@dataclass(frozen=True)
class LowerOptions:
    """The options ``check --lower`` shares with the FX check."""

    jobs: int | None
    golden: Path | None
    update_golden: bool
    fmt: str
    verbose: bool
    allow_import: list[str] | None


def lower_command(spec: str, target: str, models: list[str], options: LowerOptions) -> int:
    """``check --lower TARGET`` (backend_spec.lower): the report rendered, exit status (0 ok or
    matching the golden, 1 failures or drift). What ExecuTorch and inductor print is held back."""
    from backend_spec.cli.render import lower as render
    from backend_spec.cli.render.foreign import HeldBack, held_back
    from backend_spec.lower import TARGETS, LoweringMissing, require
    from backend_spec.lower import golden as goldens
    from backend_spec.lower.run import lower_check

    if target not in TARGETS:
        raise fail_usage(f"--lower must be {' or '.join(TARGETS)}, not {target!r}")
    if options.update_golden and options.golden is None:
        raise fail_usage("--update-golden needs --golden FILE")
    if options.update_golden:
        check_output_path(options.golden)
    recorded = None
    if options.golden is not None and not options.update_golden:
        try:
            recorded = goldens.read(existing(options.golden), target)
        except ValueError as exc:
            raise fail_usage(str(exc)) from None
    try:
        require(target)
    except LoweringMissing as exc:
        raise fail_usage(str(exc)) from None
    backend_config = load_ref(spec, options.allow_import).backend_config
    names = _lower_models(models)
    with held_back(HeldBack()):
        report = lower_check(
            spec,
            target,
            names,
            jobs=options.jobs,
            allow_imports=allowed(options.allow_import),
            backend_config=backend_config,
        )
    drift = goldens.drift(report, recorded) if recorded is not None else None
    if options.fmt == "json":
        out(render.report_json(report, drift))
    else:
        out(render.report_text(report, drift, verbose=options.verbose))
    if options.update_golden:
        assert options.golden is not None
        goldens.write(report, options.golden)
        note(render.golden_line(report, options.golden, written=True))
        return 0
    if recorded is not None:
        if (moved := goldens.version_note(report, recorded)) is not None:
            note(f"note: {render.escape(moved)}")
        if not drift:
            note(render.golden_line(report, options.golden, written=False))
        return 1 if drift else 0
    return 1 if report.failed else 0
