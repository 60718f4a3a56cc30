"""``explain``: what a spec quantizes in a model, node by node."""

from __future__ import annotations

from typing import Annotated

import typer

from backend_spec.cli.common import load_ref, refuse_flags
from backend_spec.cli.options import AllowImport, BackendArg, TextOrJson, app
from backend_spec.cli.render.streams import fail_usage, note, out, out_line


@app.command("explain")
def explain_command(
    spec: BackendArg,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="A zoo or pt2e reference model by name (as check --model takes), or "
            "module:factory / file.py:factory returning (model, example_inputs).",
        ),
    ],
    qconfig_mapping: Annotated[
        str | None,
        typer.Option(
            "--qconfig-mapping",
            help="module:attr of a QConfigMapping (default: the spec's own, "
            "backend_spec.qconfig_mapping).",
        ),
    ] = None,
    torch_default: Annotated[
        bool,
        typer.Option("--torch-default", help="Use torch's get_default_qconfig_mapping() (quint8)."),
    ] = False,
    fmt: TextOrJson = "text",
    allow_import: AllowImport = None,
    flow: Annotated[str, typer.Option(help="fx (default) or pt2e: explain ATen nodes.")] = "fx",
    qat: Annotated[
        bool, typer.Option("--qat", help="With --flow pt2e: the QAT quantizer, training export.")
    ] = False,
    lower: Annotated[
        str | None,
        typer.Option(
            "--lower",
            help="With --flow pt2e: xnnpack or inductor; say where each node ran after "
            "lowering, and why a quantized op missed its int8 kernel.",
        ),
    ] = None,
) -> None:
    """Explain, node by node, what SPEC quantizes in a model and why nodes are skipped."""
    import json

    from backend_spec.analysis import explain

    if flow not in ("fx", "pt2e"):
        raise fail_usage(f"--flow must be fx or pt2e, not {flow!r}")
    if flow == "pt2e":  # the quantizer is the spec's own: no QConfigMapping to choose
        fx_only = {
            "--qconfig-mapping": qconfig_mapping is not None,
            "--torch-default": torch_default,
        }
        refuse_flags("--flow pt2e", [flag for flag, given in fx_only.items() if given])
    if torch_default and qconfig_mapping:
        raise fail_usage("--torch-default and --qconfig-mapping exclude each other")
    if qat and flow != "pt2e":
        raise fail_usage("--qat applies to --flow pt2e only")
    if lower is not None and (flow != "pt2e" or qat):
        raise fail_usage("--lower applies to --flow pt2e (post-training) only")
    compiled = load_ref(spec, allow_import)
    try:
        net, inputs = _model(model)
        if qconfig_mapping:
            mapping = explain.qconfig_mapping_from(qconfig_mapping)
        elif torch_default:
            mapping = explain.torch_default_mapping()
        else:
            mapping = explain.spec_mapping(compiled.backend_config)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    if lower is not None:
        raise typer.Exit(_explain_lowering(compiled.backend_config, lower, net, inputs, fmt))
    if flow == "pt2e":
        from backend_spec.cli.render.pt2e import verdicts_json, verdicts_text
        from backend_spec.pt2e.check import explain_pt2e

        verdicts = explain_pt2e(compiled.backend_config, net, inputs, qat=qat)
        out((verdicts_json if fmt == "json" else verdicts_text)(verdicts))
        return
    try:
        report = explain.explain_compiled(compiled, net, inputs, mapping)
    except Exception as exc:  # torch failed on this spec and model: one line, never a traceback
        from backend_spec.cli.render.console import escape

        note(
            escape(
                f"bespec: error: preparing the model with {spec} failed: "
                f"{type(exc).__name__}: {exc}"
            )
            + " (hint: check that each fuser_method fits its pattern; `bespec lint` tells)"
        )
        raise typer.Exit(1) from None
    if fmt == "json":
        out_line(json.dumps(report.to_dict(), indent=2))
    else:
        from backend_spec.cli.render.console import make_console
        from backend_spec.cli.render.explain import print_explanation

        print_explanation(report, make_console())


def _model(ref: str):
    """``(model, example_inputs)`` of ``--model``: a named reference model (the zoo, the pt2e
    nets), else a ``module:factory`` reference."""
    from backend_spec.analysis import explain
    from backend_spec.pt2e.check import reference_models

    named = reference_models()
    if ref in named:
        return named[ref]()
    return explain.model_from_factory(ref)


def _explain_lowering(backend_config, target: str, net, inputs, fmt: str) -> int:
    """``explain --flow pt2e --lower TARGET``: per node, the spec's verdict and where the
    lowering put it; exit 1 when a quantized op missed its int8 kernel or lowering crashed."""
    import json

    from backend_spec.cli.render.foreign import HeldBack, held_back
    from backend_spec.cli.render.lower import explain_text
    from backend_spec.lower import TARGETS, LoweringMissing, require
    from backend_spec.lower.run import explain_lowering

    if target not in TARGETS:
        raise fail_usage(f"--lower must be {' or '.join(TARGETS)}, not {target!r}")
    try:
        require(target)
    except LoweringMissing as exc:
        raise fail_usage(str(exc)) from None
    with held_back(HeldBack()):
        result, verdicts = explain_lowering(backend_config, target, net, inputs)
    if fmt == "json":
        from backend_spec.cli.render.lower import model_json

        document = {"model": model_json(result), "nodes": [vars(v) for v in verdicts]}
        out_line(json.dumps(document, indent=2))
    else:
        out(explain_text(result, verdicts))
    return 0 if result.ok else 1
