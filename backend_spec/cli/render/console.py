"""The console policy: the one place that decides how bespec's reports reach a terminal or a pipe.

* **Width**: ``COLUMNS`` when set (terminal or pipe alike, so ``COLUMNS=80 bespec show x86 | less``
  lays out for 80 columns), else the terminal's width, else :data:`DEFAULT_WIDTH` in pipes and
  CI logs (rich would otherwise assume 80 there).
* **Colour**: only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org).
* **Markup**: never on user text. Text from a spec or a model (names, paths, messages) goes
  to rich as :class:`rich.text.Text` (which rich never parses) or with ``markup=False``;
  :func:`print_table` does this for every cell. Only bespec's own literals may use markup.
* **Layout**: no trailing spaces on any line (rich pads cells and titles), and tables never split
  a word: :func:`print_table` gives each column the width of its longest word, and when the
  columns cannot fit side by side it prints one block per row instead.

User text is made safe for a terminal here too: :func:`escape` (defined beside Diagnostic, whose
``str`` uses it, so that the core does not import the CLI) turns control and invisible
characters into visible escapes, and :func:`user_text` / :func:`print_table` hand it to rich as
:class:`~rich.text.Text`, never as markup.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, TypeAlias

from backend_spec.diagnostics import escape

if TYPE_CHECKING:  # rich loads when a report is drawn: ``lint`` and errors never need it
    from rich.console import Console
    from rich.text import Text

#: Width of reports written to a pipe or a file when ``COLUMNS`` is not set.
DEFAULT_WIDTH = 100

_TRAILING_SPACES = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")

Cell: TypeAlias = "str | Text"


def output_width(stream: IO[str]) -> int:
    """The width to lay reports out for on ``stream``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if _isatty(stream):
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def use_color(stream: IO[str]) -> bool:
    """Colour only on a terminal, and not when the user set ``NO_COLOR``."""
    return not os.environ.get("NO_COLOR") and _isatty(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _TrimmedLines(io.TextIOBase):
    """A text stream that drops trailing spaces from each line before passing it on."""

    def __init__(self, stream: IO[str]):
        self._stream = stream
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._stream.write(_TRAILING_SPACES.sub(r"\1", line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return _isatty(self._stream)


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that follows the policy above."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    color = use_color(stream)
    return Console(
        file=_TrimmedLines(stream),
        width=output_width(stream),
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        emoji=False,
        highlight=False,
    )


def user_text(text: object, style: str = "") -> Text:
    """User text for a rich table or ``print``: escaped, and never read as markup
    (a name ``[/]`` or ``[link=...]`` prints as itself)."""
    from rich.text import Text

    return Text(escape(text), style=style)


def _plain(cell: Cell) -> str:
    return escape(cell) if isinstance(cell, str) else cell.plain


def _text(cell: Cell) -> Text:
    """A cell as rich Text: a plain string is escaped and taken literally, never as markup."""
    return user_text(cell) if isinstance(cell, str) else cell


def _longest_word(cell: Cell) -> int:
    return max((len(word) for word in _plain(cell).split()), default=0)


def print_table(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    heading_cells: int = 1,
) -> None:
    """Print a table whose cells wrap between words only.

    Each column is at least as wide as its longest word. When those widths do not fit the
    console side by side, each row becomes a block instead: its first ``heading_cells`` cells
    as a heading, then one ``header  value`` line per other non-empty cell, wrapped between
    words.
    """
    minimum = [
        max([_longest_word(header), *(_longest_word(row[i]) for row in rows)])
        for i, header in enumerate(headers)
    ]
    natural = [
        max([len(header), *(len(_plain(row[i])) for row in rows)])
        for i, header in enumerate(headers)
    ]
    widths = column_widths(minimum, natural, console.width - 2 * (len(headers) - 1))
    if widths is None:
        _print_blocks(console, title, headers, rows, heading_cells)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=user_text(title), title_justify="left", box=None, pad_edge=False)
    table.title_style = "bold"
    for header, width in zip(headers, widths, strict=True):
        table.add_column(Text(header), width=width, overflow="fold", header_style="bold")
    for row in rows:
        table.add_row(*map(_text, row))
    console.print(table)


def column_widths(minimum: list[int], natural: list[int], room: int) -> list[int] | None:
    """Column widths that fit ``room``: every column gets its ``minimum`` (its longest word),
    then the room left goes to the columns that would wrap, narrowest need first, up to their
    ``natural`` width. None when the minimums alone do not fit."""
    widths = list(minimum)
    left = room - sum(widths)
    if left < 0:
        return None
    wanting = sorted(range(len(widths)), key=lambda i: natural[i] - widths[i])
    for position, i in enumerate(wanting):
        share = left // (len(wanting) - position)
        grant = min(max(natural[i] - widths[i], 0), share)
        widths[i] += grant
        left -= grant
    return widths


def _print_blocks(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    heading_cells: int,
) -> None:
    from rich.text import Text

    console.print(user_text(title, "bold"))
    label = max(len(h) for h in headers[heading_cells:]) + 2
    indent = " " * 4
    for row in rows:
        console.print()
        console.print(Text("  ".join(_plain(c) for c in row[:heading_cells]), style="bold"))
        for header, cell in zip(headers[heading_cells:], row[heading_cells:], strict=True):
            text = _plain(cell)
            if not text:
                continue
            first = f"{indent}{header:<{label}}"
            lines = textwrap.wrap(
                text,
                width=max(console.width, len(first) + 1),
                initial_indent=first,
                subsequent_indent=" " * len(first),
                break_long_words=False,
                break_on_hyphens=False,
            )
            console.print(Text("\n".join(lines), style=_text(cell).style))


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 fusion``, ``2 fusions``, ``0 fusions`` (``plural_form`` for irregular nouns)."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


__all__ = [
    "DEFAULT_WIDTH",
    "escape",
    "make_console",
    "output_width",
    "plural",
    "print_table",
    "use_color",
    "user_text",
]
