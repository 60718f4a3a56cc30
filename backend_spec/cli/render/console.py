"""Rich consoles for bespec's reports: full width on a terminal, a fixed 120 columns in pipes
and CI logs (rich would otherwise wrap tables at 80 columns there).

Also where user text is made safe for a terminal: :func:`escape` (defined beside Diagnostic,
whose ``str`` uses it, so that the core does not import the CLI) and :func:`user_text` for
rich: text from a spec never reaches the output raw nor is read as markup.
"""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console
from rich.text import Text

from backend_spec.diagnostics import escape

__all__ = ["PIPE_WIDTH", "escape", "make_console", "use_color", "user_text"]

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


def user_text(text: object, style: str = "") -> Text:
    """User text for a rich table or ``print``: escaped, and never read as markup
    (a name ``[/]`` or ``[link=...]`` prints as itself)."""
    return Text(escape(text), style=style)
