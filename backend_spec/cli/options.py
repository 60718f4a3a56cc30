"""The ``bespec`` typer app and the options its commands share: parsing only.

Startup is part of the interface: every heavy import (torch above all, but also pydantic and
rich) happens inside the command that needs it, so ``--help``, ``schema``, ``init`` and
``fmt`` answer without loading torch (``benchmarks/bench_startup.py``). ``--version`` imports
torch: it reports the torch that runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from backend_spec.cli.render.streams import cache_notes, fail_usage, out_line

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
    """bespec's version and those of the torch and torchao it runs with: what a bug report
    needs. torch's is ``torch.__version__`` of the torch that imports (package metadata can
    name another one); a torch that cannot be imported ends in the one-line refusal."""
    if value:
        from backend_spec import __version__
        from backend_spec.versions import TORCH_REQUIREMENT, installed, running_torch

        torch_version = running_torch()
        out_line(f"bespec {__version__}")
        out_line(f"torch {torch_version} (supported: {TORCH_REQUIREMENT})")
        out_line(f"torchao {installed('torchao') or 'not installed'} (for pt2e)")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Options that come before the command."""
    ctx.call_on_close(cache_notes)  # after the command's own output, whatever its outcome


def format_option(*choices: str, help: str) -> Any:  # noqa: A002 (typer's keyword)
    """The ``--format`` option of a command: validated here, once, against ``choices``."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    return typer.Option("--format", help=help, callback=check)


TextOrJson = Annotated[str, format_option("text", "json", help="text or json.")]

RuleTokens = Annotated[
    list[str] | None,
    typer.Option(help="Rule codes or slugs, prefixes allowed; repeatable or comma-separated."),
]
