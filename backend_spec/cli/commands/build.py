"""``compile``, ``show``, ``schema``, ``init`` and ``docs``: a spec in, its compiled forms and
descriptions out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from backend_spec.cli.common import (
    allowed,
    check_output_path,
    existing,
    load_ref,
    output_format,
    project,
    report_errors,
    write_file,
    write_output,
    write_spec,
)
from backend_spec.cli.options import (
    AllowExtendsOutside,
    AllowImport,
    BackendArg,
    SchemaRef,
    SpecArg,
    app,
    format_option,
)
from backend_spec.cli.render.streams import diagnostics, fail_usage, note, out_line
from backend_spec.diagnostics import Severity, SpecError


def compile_reporting(spec: Path, allow_import: list[str] | None, extends_outside: bool = False):
    """Compile SPEC for ``bespec compile``: errors (exit 1) and lint findings (warnings) go to
    stderr together; the project's [tool.bespec] select/ignore apply, as for ``bespec lint``."""
    from backend_spec.cli.render.console import plural
    from backend_spec.lint.registry import Selection, select_rules
    from backend_spec.lint.runner import compile_report

    settings = project()
    try:
        rules = select_rules(Selection(settings.lint.select, settings.lint.ignore))
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    compiled, found = compile_report(
        spec, settings.allowed(allow_import), rules, allow_extends_outside=extends_outside
    )
    if compiled is None:
        raise report_errors(SpecError(found))
    found = [d for d in found if d.severity is not Severity.INFO]  # notes are for `bespec lint`
    if found:
        diagnostics(found)
        note(f"{plural(len(found), 'warning')}.")
    return compiled


@app.command("compile")
def compile_command(
    spec: SpecArg,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Write a standalone Python module here."),
    ] = None,
    allow_import: AllowImport = None,
    emit_pytest: Annotated[
        Path | None,
        typer.Option(
            "--emit-test",
            help="Also write a pytest file that runs `bespec check` against a golden result.",
        ),
    ] = None,
    golden: Annotated[
        Path | None,
        typer.Option(help="The golden for --emit-test (default: next to it, .golden.json)."),
    ] = None,
    target: Annotated[
        str,
        typer.Option(help="fx: a BackendConfig module; pt2e: a torchao Quantizer module."),
    ] = "fx",
    allow_extends_outside: AllowExtendsOutside = False,
) -> None:
    """Validate and compile SPEC; print what it holds."""
    from backend_spec.cli.render.summary import print_summary

    if target not in ("fx", "pt2e"):
        raise fail_usage(f"--target must be fx or pt2e, not {target!r}")
    check_output_path(output)
    check_output_path(emit_pytest)
    compiled = compile_reporting(existing(spec), allow_import, allow_extends_outside)
    print_summary(compiled.backend_config, spec)
    if target == "pt2e":
        compile_pt2e(compiled.backend_config, spec, output)
    elif output is not None:
        from backend_spec.export.python import generate_module, module_warnings

        try:
            text = generate_module(compiled.backend_config, source=str(spec))
        except SpecError as error:
            raise report_errors(error) from None
        write_file(output, text)
        diagnostics(module_warnings(compiled.backend_config, str(spec), compiled.doc))
        out_line(f"wrote {output}")
    if emit_pytest is not None:
        write_emitted_test(spec, emit_pytest, golden, allow_import)


def compile_pt2e(backend_config: Any, spec: Path, output: Path | None) -> None:
    """The rule table's report; with ``output``, the standalone quantizer module written."""
    from backend_spec.cli.render.pt2e import compile_lines
    from backend_spec.pt2e.emit import generate_module
    from backend_spec.pt2e.rules import compile_table

    table, report = compile_table(backend_config)
    for line in compile_lines(report):
        out_line(line)
    if output is not None:
        qat_table = compile_table(backend_config, qat=True)[0]
        write_file(output, generate_module(table, source=str(spec), qat_table=qat_table))
        out_line(f"wrote {output}")


def write_emitted_test(
    spec: Path, test_path: Path, golden: Path | None, allow_import: list[str] | None
) -> None:
    """The regression test bespec emits beside the BackendConfig, for the user's own CI."""
    from backend_spec.check import emit_pytest
    from backend_spec.files import WriteError

    golden = golden or test_path.with_suffix(".golden.json")
    try:
        emit_pytest(spec, golden, test_path, allow_imports=allowed(allow_import))
    except WriteError as exc:
        raise fail_usage(str(exc)) from None
    out_line(f"wrote {test_path}")
    if not golden.exists():
        out_line(f"create its golden with: bespec check {spec} --golden {golden} --update-golden")


@app.command("show")
def show_command(
    backend: BackendArg,
    allow_import: AllowImport = None,
    allow_extends_outside: AllowExtendsOutside = False,
) -> None:
    """Print the resolved pattern table of BACKEND, with where each entry came from."""
    from backend_spec.cli.render.summary import print_pattern_table

    print_pattern_table(load_ref(backend, allow_import, extends_outside=allow_extends_outside))


@app.command("schema")
def schema_command(
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here.")] = None,
) -> None:
    """Print (or write) the JSON Schema of the spec format, for editors and validators."""
    from backend_spec.specfile.schema import schema_text

    write_output(schema_text(), output)


@app.command("init")
def init_command(
    name: Annotated[str, typer.Argument(help="The backend's name (letters, digits, _ and -).")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="The file (default: NAME.yaml).")
    ] = None,
    fmt: Annotated[
        str | None,
        format_option("yaml", "toml", help="yaml or toml (default: from -o, else yaml)."),
    ] = None,
    schema_ref: SchemaRef = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a starter spec for a new backend (and the schema its editors use, beside it)."""
    from backend_spec.specfile.schema import SCHEMA_NAME
    from backend_spec.specfile.starter import starter_text, valid_name

    if not valid_name(name):
        raise fail_usage(f"{name!r} is not a backend name: use letters, digits, _ and -")
    fmt = output_format(fmt, output)
    output = output or Path(f"{name}.{fmt}")
    if output.exists() and not force:
        raise fail_usage(f"{output} exists; use --force to overwrite it")
    write_spec(starter_text(name, fmt, schema_ref or SCHEMA_NAME), output, schema_ref)
    note(f"next: bespec compile {output}")


@app.command("docs")
def docs_command(
    spec: BackendArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here.")] = None,
    allow_import: AllowImport = None,
) -> None:
    """Print a Markdown table of what a backend supports."""
    from backend_spec.cli.render.docs import backend_markdown

    check_output_path(output)
    config = load_ref(spec, allow_import).backend_config
    text = backend_markdown(config, source=spec)
    write_output(text, output)
