"""Rich consoles for bespec's reports: full width on a terminal, a fixed 120 columns in pipes
and CI logs (rich would otherwise wrap tables at 80 columns there)."""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console

PIPE_WIDTH = 120


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that does not squeeze tables when output is piped."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else PIPE_WIDTH
    return Console(stderr=stderr, width=width, highlight=False)


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything non-empty
    (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
