"""What the commands share between parsing and rendering: arguments turned into objects
(paths checked, backends loaded, settings read) and documents written safely. Misuse exits 2
with one line; a spec's problems exit 1."""

from __future__ import annotations

from pathlib import Path

import typer

from backend_spec.cli.render.streams import diagnostics, fail_usage, note, out_escaped
from backend_spec.diagnostics import SpecError
from backend_spec.settings import Settings, project_settings


def write_output(text: str, output: Path | None) -> None:
    """A command's document: to ``output`` (safely, "wrote" on stderr) or to stdout, where
    user text is escaped line by line."""
    if output is None:
        out_escaped(text)
        return
    write_file(output, text)
    note(f"wrote {output}")


def write_spec(text: str, output: Path | None, schema_ref: str | None) -> None:
    """A spec a command writes; with the default reference, also the schema its first line
    points at, beside it (so that the reference works wherever the file is)."""
    write_output(text, output)
    if output is not None and schema_ref is None:
        from backend_spec.specfile.schema import write_beside

        if (schema := write_beside(output)) is not None:
            note(f"wrote {schema}")


def output_format(fmt: str | None, output: Path | None) -> str:
    """The format of a written spec: --format, else the suffix of -o (in any case, as the
    readers take it), else yaml."""
    from backend_spec.files import suffix_of
    from backend_spec.specfile.source import FORMATS

    if fmt is not None:
        return fmt
    return FORMATS.get(suffix_of(output), "yaml") if output is not None else "yaml"


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


def report_errors(error: SpecError, grouped: bool = False) -> typer.Exit:
    """Print a SpecError's diagnostics to stderr; exit 1. ``grouped``: one entry per cause
    with a count (export refusals, where hundreds of patterns share one cause)."""
    from backend_spec.cli.render.console import plural

    diagnostics(error.diagnostics, grouped=grouped)
    note(f"{plural(len(error.diagnostics), 'problem')} found.")
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


def refuse_flags(where: str, flags: list[str]) -> None:
    """Exit 2 with one line when flags are given that ``where`` does not honour: a flag means
    the same under every ``--flow``, or it is refused."""
    if flags:
        them = "it" if len(flags) == 1 else "them"
        raise fail_usage(f"{where} does not take {', '.join(flags)}; drop {them} or use --flow fx")


def model_factories(refs: list[str] | None) -> list | None:
    """``--model`` as ``(name, factory)`` pairs, the same in every flow and command: a zoo or
    pt2e reference model by name, else ``module:factory`` / ``file.py:factory`` imported
    here, at the command line, where a reference is trusted like a script the user runs;
    None (each flow's default models) when none are given."""
    from backend_spec.check.run import import_factory
    from backend_spec.pt2e.check import reference_models

    if not refs:
        return None
    named = reference_models()
    models: list = []
    for ref in dict.fromkeys(refs):
        if ref in named:
            models.append((ref, named[ref]))
            continue
        try:
            models.append((ref, import_factory(ref)))
        except ValueError as exc:
            raise fail_usage(f"--model {ref}: {exc}") from None
    return models
