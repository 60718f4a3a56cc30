"""The ``bespec`` command line. This layer only parses arguments and picks a reporter; the work
lives in the pipeline modules. Exit codes: 0 ok, 1 problems found, 2 misuse.

Startup is part of the interface: every heavy import (torch above all, but also pydantic and
rich) happens inside the command that needs it, so ``--help``, ``--version``, ``schema``,
``init`` and ``fmt`` answer without loading torch (``benchmarks/bench_startup.py``).
The format these commands read is described in ``docs/format.md``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from backend_spec.cli.render.diagnostics import FORMATS as REPORT_FORMATS
from backend_spec.diagnostics import Severity, SpecError
from backend_spec.quiet import silence_globally
from backend_spec.settings import Settings, project_settings

app = typer.Typer(
    name="bespec",
    help="Compile, check and lint declarative PyTorch quantization backend specs. "
    "The format is described in bespec's docs/format.md; `bespec schema` prints its JSON Schema.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _module_names(values: list[str] | None) -> list[str] | None:
    """``--allow-import`` values must be dotted module names: anything else is misuse (exit 2)."""
    from backend_spec.names.resolver import check_module_names

    try:
        check_module_names(values or ())
    except ValueError as exc:
        raise fail_usage(f"--allow-import: {exc}") from None
    return values


AllowImport = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-import",
        help="A module (with submodules) whose names the spec may use; repeatable.",
        callback=_module_names,
    ),
]
AllowExtendsOutside = Annotated[
    bool,
    typer.Option(
        "--allow-extends-outside",
        help="Let 'extends' read spec files outside the spec's folder (docs/security.md).",
    ),
]
SpecArg = Annotated[Path, typer.Argument(help="A spec file (.yaml, .yml or .toml).")]


def complete_backend(incomplete: str) -> list[str]:
    """Shell completion of built-in backend names (files complete as usual when none match)."""
    from backend_spec.names.vocabulary import BUILTIN_BACKENDS

    return [name for name in BUILTIN_BACKENDS if name.startswith(incomplete)]


BackendArg = Annotated[
    str,
    typer.Argument(
        help="A spec file, a built-in backend (fbgemm, x86...) or module:attr.",
        autocompletion=complete_backend,
    ),
]
SchemaRef = Annotated[
    str | None,
    typer.Option(
        "--schema-ref",
        help="Where the file's $schema comment points (a path relative to it, or a URL). "
        "Default: a copy of the schema written beside the file.",
    ),
]


def _print_version(value: bool) -> None:
    """bespec's version and those of the torch and torchao it runs with (from package metadata,
    so without importing torch): what a bug report needs."""
    if value:
        from backend_spec import __version__
        from backend_spec.versions import TORCH_REQUIREMENT, installed

        typer.echo(f"bespec {__version__}")
        typer.echo(
            f"torch {installed('torch') or 'not installed'} (supported: {TORCH_REQUIREMENT})"
        )
        typer.echo(f"torchao {installed('torchao') or 'not installed'} (for pt2e)")
        raise typer.Exit()


@app.callback()
def options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Options that come before the command."""


def format_option(*choices: str, help: str) -> Any:  # noqa: A002 (typer's keyword)
    """The ``--format`` option of a command: validated here, once, against ``choices``."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    return typer.Option("--format", help=help, callback=check)


TextOrJson = Annotated[str, format_option("text", "json", help="text or json.")]


def write_output(text: str, output: Path | None) -> None:
    """A command's document: to ``output`` (safely, "wrote" on stderr) or to stdout, where
    user text is escaped line by line."""
    if output is None:
        sys.stdout.write(_terminal_safe(text))
        return
    write_file(output, text)
    typer.echo(f"wrote {output}", err=True)


def write_spec(text: str, output: Path | None, schema_ref: str | None) -> None:
    """A spec a command writes; with the default reference, also the schema its first line
    points at, beside it (so that the reference works wherever the file is)."""
    write_output(text, output)
    if output is not None and schema_ref is None:
        from backend_spec.specfile.schema import write_beside

        if (schema := write_beside(output)) is not None:
            typer.echo(f"wrote {schema}", err=True)


def output_format(fmt: str | None, output: Path | None) -> str:
    """The format of a written spec: --format, else the suffix of -o (in any case, as the
    readers take it), else yaml."""
    from backend_spec.files import suffix_of
    from backend_spec.specfile.source import FORMATS

    if fmt is not None:
        return fmt
    return FORMATS.get(suffix_of(output), "yaml") if output is not None else "yaml"


def fail_usage(message: str) -> typer.Exit:
    """Report misuse of a command (exit 2) on one line, user text escaped."""
    from backend_spec.cli.render.console import escape

    typer.echo(f"bespec: error: {escape(message)}", err=True)
    return typer.Exit(2)


def existing(path: Path) -> Path:
    if not path.is_file():
        if path.exists():  # stat only: a FIFO or /dev/zero is never opened here
            raise fail_usage(f"not a regular file (a directory, device or FIFO): {path}")
        raise fail_usage(f"no such file: {path}")
    return path


def write_file(path: Path, text: str) -> None:
    """Write a command's output file safely (backend_spec.files); a refused path is misuse."""
    from backend_spec.files import WriteError, write_atomic

    try:
        write_atomic(path, text)
    except WriteError as exc:
        raise fail_usage(str(exc)) from None


def check_output_path(path: Path | None) -> None:
    """Refuse an unwritable output path before any work is done (exit 2)."""
    from backend_spec.files import WriteError, ensure_writable

    if path is None:
        return
    try:
        ensure_writable(path)
    except WriteError as exc:
        raise fail_usage(str(exc)) from None


def _terminal_safe(text: str) -> str:
    """Text bound for stdout with user text escaped, line by line (files are written as is)."""
    from backend_spec.diagnostics import escape_lines

    return escape_lines(text)


def report_errors(error: SpecError, grouped: bool = False) -> typer.Exit:
    """Print a SpecError's diagnostics to stderr; exit 1. ``grouped``: one entry per cause
    with a count (export refusals, where hundreds of patterns share one cause)."""
    from backend_spec.cli.render.console import plural, use_color
    from backend_spec.cli.render.diagnostics import render_grouped, render_text

    render = render_grouped if grouped else render_text
    sys.stderr.write(render(error.diagnostics, color=use_color(sys.stderr)))
    typer.echo(f"{plural(len(error.diagnostics), 'problem')} found.", err=True)
    return typer.Exit(1)


def project() -> Settings:
    """The project's ``[tool.bespec]`` settings (the working directory's pyproject.toml, never
    one found next to a spec); malformed settings exit 2 with one line."""
    try:
        return project_settings()
    except ValueError as exc:
        raise fail_usage(str(exc)) from None


def allowed(allow_import: list[str] | None) -> list[str]:
    """The effective allow-list: ``--allow-import`` plus the project's ``allow_imports``."""
    return project().allowed(allow_import)


def load_ref(
    ref: str,
    allow_import: list[str] | None,
    spec_errors_exit: int = 1,
    *,
    extends_outside: bool = False,
):
    """The compiled backend an argument names (spec file, built-in or module:attr).

    A reference that names nothing usable exits 2 with one line; a spec's problems are
    printed and exit ``spec_errors_exit``.
    """
    from backend_spec.compiler.backends import load_compiled

    try:
        return load_compiled(ref, allowed(allow_import), allow_extends_outside=extends_outside)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    except SpecError as error:
        report_errors(error)
        raise typer.Exit(spec_errors_exit) from None


def compile_reporting(spec: Path, allow_import: list[str] | None, extends_outside: bool = False):
    """Compile SPEC for ``bespec compile``: errors (exit 1) and lint findings (warnings) go to
    stderr together; the project's [tool.bespec] select/ignore apply, as for ``bespec lint``."""
    from backend_spec.cli.render.console import plural, use_color
    from backend_spec.cli.render.diagnostics import render_text
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
        sys.stderr.write(render_text(found, color=use_color(sys.stderr)))
        typer.echo(f"{plural(len(found), 'warning')}.", err=True)
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
        from backend_spec.export.python import generate_module

        try:
            text = generate_module(compiled.backend_config, source=str(spec))
        except SpecError as error:
            raise report_errors(error) from None
        write_file(output, text)
        typer.echo(f"wrote {output}")
    if emit_pytest is not None:
        write_emitted_test(spec, emit_pytest, golden, allow_import)


def compile_pt2e(backend_config: Any, spec: Path, output: Path | None) -> None:
    """The rule table's report; with ``output``, the standalone quantizer module written."""
    from backend_spec.cli.render.pt2e import compile_lines
    from backend_spec.pt2e.emit import generate_module
    from backend_spec.pt2e.rules import compile_table

    table, report = compile_table(backend_config)
    for line in compile_lines(report):
        typer.echo(line)
    if output is not None:
        qat_table = compile_table(backend_config, qat=True)[0]
        write_file(output, generate_module(table, source=str(spec), qat_table=qat_table))
        typer.echo(f"wrote {output}")


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
    typer.echo(f"wrote {test_path}")
    if not golden.exists():
        typer.echo(f"create its golden with: bespec check {spec} --golden {golden} --update-golden")


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
    typer.echo(f"next: bespec compile {output}", err=True)


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
) -> None:
    """Write a BackendConfig, or a pt2e Quantizer (probed and verified), as a spec."""
    from backend_spec.export import build_document, emit, name_from_ref
    from backend_spec.export.document import foreign_packages
    from backend_spec.specfile.schema import SCHEMA_NAME

    fmt = output_format(fmt, output)
    factory = _quantizer_ref(name)
    if factory is not None:
        check_output_path(output)
        models = [_probe_model(ref) for ref in probe_models or ()]
        _export_quantizer(
            factory, backend_name or name_from_ref(name), fmt, models, output, schema_ref
        )
        return
    if probe_models:
        raise fail_usage("--probe-models applies to a pt2e Quantizer, not a BackendConfig")
    chosen = _export_base(name, base)  # checked before any import or work
    check_output_path(output)
    config = load_ref(name, allow_import).backend_config
    if backend_name is None and not config.name:
        backend_name = name_from_ref(name)
        typer.echo(
            f"note: {name} has no name; the spec is named {backend_name!r} (set one with --name)",
            err=True,
        )
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
        typer.echo(f"note: written as 'extends: {chosen}' plus the differences", err=True)
    packages = foreign_packages(document)
    if packages:
        flags = " ".join(f"--allow-import {p}" for p in packages)
        typer.echo(f"note: the spec names objects outside torch; load it with {flags}", err=True)
    if document.notes:
        from backend_spec.cli.render.console import use_color
        from backend_spec.cli.render.diagnostics import render_text

        sys.stderr.write(render_text(document.notes, color=use_color(sys.stderr)))
    write_spec(emit(document, fmt, schema_ref or SCHEMA_NAME), output, schema_ref)


def _quantizer_ref(ref: str):
    """A factory of fresh Quantizers when ``ref`` is ``module:attr`` naming a torchao pt2e
    Quantizer or a zero-argument function returning one; None for anything else (a spec, a
    built-in, a BackendConfig), which export handles as before."""
    from backend_spec.export.quantizer import is_quantizer, quantizer_factory
    from backend_spec.names.importer import call_ref, import_ref, split_ref
    from backend_spec.names.vocabulary import BUILTIN_BACKENDS

    if ref in BUILTIN_BACKENDS or Path(ref).is_file() or not split_ref(ref):
        return None
    try:
        obj = import_ref(ref)
        if is_quantizer(obj):
            return quantizer_factory(obj)
        if callable(obj) and not isinstance(obj, type) and is_quantizer(call_ref(obj, ref)):
            return obj
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    return None


def _probe_model(ref: str) -> tuple[str, object, tuple]:
    """``(label, model, example_inputs)`` from a factory reference (exit 2 when it is not)."""
    from backend_spec.names.importer import call_ref, import_ref

    try:
        made = call_ref(import_ref(ref), ref)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], tuple)):
        raise fail_usage(f"{ref} must return (model, example_inputs), a model and a tuple")
    return ref, made[0], made[1]


def _export_quantizer(
    factory, name: str, fmt: str, models: list, output: Path | None, schema_ref: str | None
) -> None:
    """Probe, infer and verify; write the spec only when every model and probe matched."""
    from backend_spec.cli.render.quantizer_export import render_refusal, render_summary
    from backend_spec.export.quantizer import export_quantizer

    try:
        result = export_quantizer(factory, name=name, fmt=fmt, probe_models=models)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    if not result.ok:
        sys.stderr.write(render_refusal(result))
        raise typer.Exit(1)
    sys.stderr.write(render_summary(result))
    write_spec(result.text, output, schema_ref)


def _export_base(ref: str, base: str | None) -> str | None:
    """The base asked for: a built-in, ``"auto"``, or None. By default ``auto`` for a
    ``module:attr`` reference, none for a built-in or a spec file (exported as they are)."""
    from backend_spec.names.importer import split_ref
    from backend_spec.names.vocabulary import BUILTIN_BACKENDS

    if base is None:
        is_ref = ref not in BUILTIN_BACKENDS and not Path(ref).is_file() and split_ref(ref)
        return "auto" if is_ref else None
    if base == "none":
        return None
    if base != "auto" and base not in BUILTIN_BACKENDS:
        raise fail_usage(f"--base must be a built-in backend, auto or none, not {base!r}")
    return base


# -- lint ------------------------------------------------------------------------------------

RuleTokens = Annotated[
    list[str] | None,
    typer.Option(help="Rule codes or slugs, prefixes allowed; repeatable or comma-separated."),
]


@app.command("lint")
def lint_command(
    specs: Annotated[list[Path], typer.Argument(help="Spec files (.yaml, .yml, .toml).")],
    select: RuleTokens = None,
    ignore: RuleTokens = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail the run too.")] = False,
    fmt: Annotated[
        str, format_option(*REPORT_FORMATS, help="text, json, github or sarif.")
    ] = "text",
    allow_import: AllowImport = None,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache", help="Lint every file afresh (results are otherwise cached per file)."
        ),
    ] = False,
) -> None:
    """Report every problem of each SPEC: loader errors and semantic rules (docs/rules.md)."""
    from backend_spec.cli.render.console import use_color
    from backend_spec.cli.render.lint import render_lint
    from backend_spec.lint.session import lint_files
    from backend_spec.lint.settings import merged

    for spec in specs:
        existing(spec)
    settings = project()
    try:
        chosen = merged(settings.lint, select, ignore, strict)
        report = lint_files(specs, chosen, settings.allowed(allow_import), use_cache=not no_cache)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    sys.stdout.write(render_lint(report, fmt, color=use_color(sys.stdout)))
    if fmt == "text":
        typer.echo(report.summary(), err=True)
    raise typer.Exit(1 if report.failed else 0)


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
            help="A zoo model, module:factory or file.py:factory returning (model, "
            "example_inputs); repeatable (default: the whole zoo).",
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
    if flow != "fx":
        fx_only = {
            "--engine": engine is not None,
            "--jobs": jobs != 1,
            "--golden": golden is not None,
            "--update-golden": update_golden,
            "--verbose": verbose,
        }
        refuse_flags(f"--flow {flow}", [flag for flag, given in fx_only.items() if given])
        raise typer.Exit(pt2e_check(spec, flow, model or [], fmt, allow_import, qat=qat))
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
    models = _check_models(model)
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
        sys.stdout.write(render.to_json_text(report, drift, verbose=True) + "\n")
    else:
        render.print_text(report, drift, verbose=verbose)
    if update_golden:
        assert golden is not None
        golden_files.write_golden(report, golden)
        typer.echo(render.golden_line(report, golden, written=True), err=True)
        raise typer.Exit(0)
    if recorded is not None:
        assert golden is not None
        if (note := golden_files.torch_note(recorded)) is not None:
            from backend_spec.cli.render.console import escape

            typer.echo(f"note: {escape(note)}", err=True)
        if not drift:
            typer.echo(render.golden_line(report, golden, written=False), err=True)
        raise typer.Exit(1 if drift else 0)
    raise typer.Exit(1 if report.failed else 0)


def _check_models(refs: list[str] | None) -> list | None:
    """The models to quantize: zoo names as they are, ``module:factory`` / ``file.py:factory``
    imported here, at the command line, where a reference is trusted like a script the user
    runs; ``None`` (the whole zoo) when none are given."""
    from backend_spec.check import zoo
    from backend_spec.check.run import import_factory

    if not refs:
        return None
    models: list = []
    for ref in dict.fromkeys(refs):
        if ref in zoo.MODELS:
            models.append(ref)
            continue
        try:
            models.append((ref, import_factory(ref)))
        except ValueError as exc:
            raise fail_usage(f"--model {ref}: {exc}") from None
    return models


def refuse_flags(where: str, flags: list[str]) -> None:
    """Exit 2 with one line when flags are given that ``where`` does not honour: a flag means
    the same under every ``--flow``, or it is refused."""
    if flags:
        them = "it" if len(flags) == 1 else "them"
        raise fail_usage(f"{where} does not take {', '.join(flags)}; drop {them} or use --flow fx")


def pt2e_check(
    spec: str,
    flow: str,
    models: list[str],
    fmt: str,
    allow_import: list[str] | None,
    *,
    qat: bool = False,
) -> int:
    """``check --flow pt2e|both`` (backend_spec.pt2e.check): the rows rendered, exit status."""
    from backend_spec.cli.render.pt2e import flow_json, flow_text
    from backend_spec.pt2e import TorchaoMissing
    from backend_spec.pt2e.check import flow_check, reference_models

    backend_config = load_ref(spec, allow_import).backend_config
    try:
        report = flow_check(backend_config, flow, reference_models(models), qat=qat)
    except TorchaoMissing as exc:
        raise fail_usage(str(exc)) from None
    sys.stdout.write((flow_json if fmt == "json" else flow_text)(report))
    return 1 if report.failed else 0


# -- explain ---------------------------------------------------------------------------------


@app.command("explain")
def explain_command(
    spec: BackendArg,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="module:factory or file.py:factory returning (model, example_inputs).",
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
    compiled = load_ref(spec, allow_import)
    try:
        net, inputs = explain.model_from_factory(model)
        if qconfig_mapping:
            mapping = explain.qconfig_mapping_from(qconfig_mapping)
        elif torch_default:
            mapping = explain.torch_default_mapping()
        else:
            mapping = explain.spec_mapping(compiled.backend_config)
    except ValueError as exc:
        raise fail_usage(str(exc)) from None
    if flow == "pt2e":
        from backend_spec.cli.render.pt2e import verdicts_json, verdicts_text
        from backend_spec.pt2e.check import explain_pt2e

        verdicts = explain_pt2e(compiled.backend_config, net, inputs, qat=qat)
        sys.stdout.write((verdicts_json if fmt == "json" else verdicts_text)(verdicts))
        return
    try:
        report = explain.explain_compiled(compiled, net, inputs, mapping)
    except Exception as exc:  # torch failed on this spec and model: one line, never a traceback
        from backend_spec.cli.render.console import escape

        typer.echo(
            escape(
                f"bespec: error: preparing the model with {spec} failed: "
                f"{type(exc).__name__}: {exc}"
            )
            + " (hint: check that each fuser_method fits its pattern; `bespec lint` tells)",
            err=True,
        )
        raise typer.Exit(1) from None
    if fmt == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        from backend_spec.cli.render.console import make_console
        from backend_spec.cli.render.explain import print_explanation

        print_explanation(report, make_console())


# -- diff ------------------------------------------------------------------------------------


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
        sys.stdout.write(diffing.render_json(differences))
    else:
        sys.stdout.write(_terminal_safe(diffing.render_text(differences, a, b)))
    raise typer.Exit(1 if differences else 0)


# -- fmt -------------------------------------------------------------------------------------


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
            typer.echo(str(found) if found else escape(f"{spec}: {exc}"), err=True)
            failed = True
            continue
        if outcome.changed:
            if diff:
                sys.stdout.write(_terminal_safe(outcome.diff()))
            typer.echo(escape(f"{'would reformat' if check else 'reformatted'} {spec}"), err=True)
            failed = failed or check
    raise typer.Exit(1 if failed else 0)


# -- docs ------------------------------------------------------------------------------------


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


def main() -> None:
    """Console-script entry point. An unsupported torch ends any command that needs torch with
    one line and exit 2 (misuse of the environment), never a traceback."""
    from backend_spec.versions import UnsupportedTorch

    silence_globally()
    try:
        app(prog_name="bespec")  # also under `python -m backend_spec`: one name for completion
    except UnsupportedTorch as exc:
        raise SystemExit(fail_usage(str(exc)).exit_code) from None


if __name__ == "__main__":
    main()
