"""``python -m backend_spec.export NAME [-o FILE] [--format yaml|toml]``: export without the CLI.

Handy for regenerating ``specs/*.yaml`` while the ``bespec`` command is being worked on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from backend_spec.diagnostics import SpecError
from backend_spec.export import dump, export_builtin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend_spec.export")
    parser.add_argument("backend", help="built-in backend name or module:attr")
    parser.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    parser.add_argument("--format", choices=("yaml", "toml"), help="default: from -o suffix")
    args = parser.parse_args(argv)
    fmt = args.format or ("toml" if args.output and args.output.suffix == ".toml" else "yaml")
    try:
        text = dump(export_builtin(args.backend), format=fmt)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
