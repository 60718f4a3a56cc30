"""The ``bespec`` command line. This layer only parses arguments, calls one function of the
pipeline per command and hands its result to a renderer (``cli/render/``, the only place that
writes to the terminal). Exit codes: 0 ok, 1 problems found, 2 misuse.

The typer app and the options commands share are in :mod:`.options`; the commands, one
module per group, in :mod:`.commands`; what turns arguments into objects in :mod:`.common`.
The format these commands read is described in ``docs/format.md``."""

from __future__ import annotations

from backend_spec.cli.commands import build, check, edit, explain, export, lint  # noqa: F401
from backend_spec.cli.options import app
from backend_spec.cli.render.streams import fail_usage
from backend_spec.quiet import silence_globally

__all__ = ["app", "main"]


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
