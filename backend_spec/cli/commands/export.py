"""``export``: a BackendConfig or a pt2e Quantizer written as a spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from backend_spec.cli.common import (
    allowed,
    check_output_path,
    load_ref,
    output_format,
    report_errors,
    write_spec,
)
from backend_spec.cli.options import AllowImport, BackendArg, SchemaRef, app, format_option
from backend_spec.cli.render.foreign import HeldBack, held_back
from backend_spec.cli.render.streams import diagnostics, err, fail_usage, note
from backend_spec.diagnostics import SpecError


@app.command("export")
def export_command(
    name: BackendArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here.")] = None,
    fmt: Annotated[
        str | None,
        format_option("yaml", "toml", help="yaml or toml (default: from -o, else yaml)."),
    ] = None,
    allow_import: AllowImport = None,
    backend_name: Annotated[
        str | None,
        typer.Option("--name", help="The spec's name (default: the config's own, if any)."),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            help="Write 'extends: BASE' plus the differences: a built-in backend, 'auto' (the "
            "default for module:attr: the clearly closest built-in, if any) or 'none'.",
        ),
    ] = None,
    schema_ref: SchemaRef = None,
    probe_models: Annotated[
        list[str] | None,
        typer.Option(
            "--probe-models",
            help="For a Quantizer: file.py:factory (or module:factory) returning (model, "
            "example_inputs), added to the models the exported spec is verified on; repeatable.",
        ),
    ] = None,
    qat: Annotated[
        bool,
        typer.Option(
            "--qat",
            help="For a Quantizer: verify in the QAT flow (prepare_qat_pt2e, models in "
            "training mode); chosen by itself when every qspec is a fake-quantize.",
        ),
    ] = False,
) -> None:
    """Write a BackendConfig, or a pt2e Quantizer (probed and verified), as a spec."""
    from backend_spec.export import build_document, emit, name_from_ref
    from backend_spec.export.document import foreign_packages
    from backend_spec.export.quantizer.refs import probe_model_of, quantizer_factory_of
    from backend_spec.names.vocabulary import export_base
    from backend_spec.specfile.schema import SCHEMA_NAME

    fmt = output_format(fmt, output)
    held = HeldBack()
    try:
        with held_back(held):
            factory = quantizer_factory_of(name)
            if factory is not None:
                models = [probe_model_of(ref) for ref in probe_models or ()]
        if factory is not None:
            check_output_path(output)
        elif probe_models or qat:
            flag = "--probe-models" if probe_models else "--qat"
            raise ValueError(f"{flag} applies to a pt2e Quantizer, not a BackendConfig")
        chosen = export_base(name, base)
    except ValueError as exc:
        _note_held(held, name)
        raise fail_usage(str(exc)) from None
    if factory is not None:
        chosen_name = backend_name or name_from_ref(name)
        trusted = allowed(allow_import)
        _export_quantizer(factory, chosen_name, fmt, models, output, schema_ref, held, qat, trusted)
        return
    _note_held(held, name)
    check_output_path(output)
    config = load_ref(name, allow_import).backend_config
    if backend_name is None and not config.name:
        backend_name = name_from_ref(name)
        note(f"note: {name} has no name; the spec is named {backend_name!r} (set one with --name)")
    if chosen == "auto":
        from backend_spec.export import resolve_base

        chosen = resolve_base(config, "auto")
    try:
        document = build_document(config, name=backend_name, base=chosen)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    except SpecError as error:
        raise report_errors(error, grouped=True) from None
    if chosen is not None:
        note(f"note: written as 'extends: {chosen}' plus the differences")
    packages = foreign_packages(document)
    if packages:
        flags = " ".join(f"--allow-import {p}" for p in packages)
        note(f"note: the spec names objects outside torch; load it with {flags}")
    if document.notes:
        diagnostics(document.notes)
    write_spec(emit(document, fmt, schema_ref or SCHEMA_NAME), output, schema_ref)


def _note_held(held: HeldBack, ref: str) -> None:
    if (line := held.note(ref)) is not None:
        note(line)


def _export_quantizer(
    factory,
    name: str,
    fmt: str,
    models: list,
    output: Path | None,
    schema_ref: str | None,
    held: HeldBack,
    qat: bool,
    allow_imports: list[str],
) -> None:
    """Probe, infer and verify; write the spec only when every model and probe matched. What
    the quantizer itself prints meanwhile is held back (``render.foreign``). ``qat`` forces
    the QAT flow; otherwise export chooses it for a quantizer of fake-quantizes only.
    ``allow_imports``: the modules whose graph passes may stand for the quantizer's
    ``transform_for_annotation`` (spec_version 8)."""
    from backend_spec.cli.render.quantizer_export import (
        render_crash,
        render_refusal,
        render_summary,
    )
    from backend_spec.export.quantizer import export_quantizer

    try:
        with held_back(held):
            result = export_quantizer(
                factory,
                name=name,
                fmt=fmt,
                probe_models=models,
                qat=True if qat else None,
                allow_imports=allow_imports,
            )
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - export's own bug: a report, never a traceback
        err(render_crash(exc))
        raise typer.Exit(1) from None
    finally:
        _note_held(held, name)
    if not result.ok:
        err(render_refusal(result))
        raise typer.Exit(1)
    err(render_summary(result))
    write_spec(result.text, output, schema_ref)
