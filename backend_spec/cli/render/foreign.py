"""Output that is not bespec's: what a user's Quantizer prints or logs while ``bespec
export`` imports it and probes it on hundreds of graphs.

A delegate's quantizer may print a line for every op it has no rule for (QNN does, about 200
times over the probes), and its package may log set-up warnings on import. Those lines answer
bespec's probing, not anything the user ran, so they are held back: the file descriptors 1 and
2 (Python's and C's writes alike) go to a temporary file while the foreign code runs, and the
export's report ends with one note saying how many lines were held back and what the first
ones were, escaped like any other text from outside.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from backend_spec.diagnostics import escape

#: Distinct lines quoted in the note, and the characters kept of each.
QUOTED, WIDTH = 3, 160
#: Bytes of held-back output read to find the quoted lines (the count reads everything).
_READ_CAP = 1 << 20


@dataclass
class HeldBack:
    """What the foreign code wrote: the number of lines, and the first distinct ones."""

    lines: int = 0
    first: list[str] = field(default_factory=list)

    def note(self, who: str) -> str | None:
        """One line for stderr, or None when nothing was written."""
        if not self.lines:
            return None
        plural = "" if self.lines == 1 else "s"
        quoted = "; ".join(escape(line[:WIDTH]) for line in self.first)
        return (
            f"note: {escape(who)} wrote {self.lines} line{plural} of its own while bespec ran "
            f"it (not shown; run it alone to see them), first: {quoted}"
        )


@contextlib.contextmanager
def held_back(found: HeldBack) -> Iterator[None]:
    """Run the block with the descriptors 1 and 2 pointing at a temporary file, so that
    Python's ``sys.stdout``/``sys.stderr`` (and every logging handler holding them) and C's
    writes all land there; what the block wrote is added to ``found`` when it ends."""
    _flush()
    with tempfile.TemporaryFile() as sink:
        saved = (os.dup(1), os.dup(2))
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            with _python_streams_on_descriptors():
                yield
        finally:
            _flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            _read(sink, found)


@contextlib.contextmanager
def _python_streams_on_descriptors() -> Iterator[None]:
    """Where ``sys.stdout``/``sys.stderr`` are not the descriptors 1 and 2 (an embedding
    application, a test runner's capture), point them there for the block. The stand-ins are
    never closed: a logging handler made inside the block may keep one, and writes through it
    later reach the restored descriptor."""
    with contextlib.ExitStack() as stack:
        for fd, redirect in ((1, contextlib.redirect_stdout), (2, contextlib.redirect_stderr)):
            if _descriptor(sys.stdout if fd == 1 else sys.stderr) != fd:
                raw = io.FileIO(fd, "w", closefd=False)
                stand_in = io.TextIOWrapper(raw, errors="replace", write_through=True)
                stack.enter_context(redirect(stand_in))
        yield


def _descriptor(stream: object) -> int | None:
    try:
        return stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def _flush() -> None:
    """Python's buffered writes go out to whichever file the descriptors point at now."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _read(sink: BinaryIO, found: HeldBack) -> None:
    sink.seek(0)
    head = sink.read(_READ_CAP)
    count, last = head.count(b"\n"), head
    while chunk := sink.read(_READ_CAP):
        count, last = count + chunk.count(b"\n"), chunk
    found.lines += count + (1 if last and not last.endswith(b"\n") else 0)
    for line in head.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if line and line not in found.first:
            found.first.append(line)
            if len(found.first) >= QUOTED:
                break
