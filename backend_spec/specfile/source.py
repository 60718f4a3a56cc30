"""Stage 1: spec text -> plain Python data, with the source position of every key and value.

YAML is read from ruamel's C event stream and composed here, so positions cost nothing extra
(the round-trip loader keeps them too, but is about eight times slower). Composing ourselves
also lets us refuse tags, report duplicate keys, and bound alias expansion and nesting depth
on hostile input. TOML is parsed by tomllib; a light scanner recovers the positions of keys,
table headers and inline values, since tomllib keeps none.

Both readers also note where the quoted and block strings are, so that the comments of a file
(for ``# noqa`` suppressions, :meth:`SourceDoc.comments`) are found in its text without a second
parse and a ``#`` inside a string is never taken for one.
"""

from __future__ import annotations

import bisect
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml.cyaml import CParser
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from ruamel.yaml.reader import ReaderError

from backend_spec import codes
from backend_spec.diagnostics import Diagnostic, SpecError
from backend_spec.files import suffix_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

KeyPath = tuple[str | int, ...]
Position = tuple[int, int]

#: Bounds that keep a hostile file from exhausting memory or time.
MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 500_000
MAX_SCALAR_CHARS = 64 * 1024
#: Longest number literal converted (a 60,000-digit hex integer converts fast but cannot be
#: printed; decimal ones over 4,300 digits do not convert at all).
MAX_NUMBER_CHARS = 100
#: Positions are kept for paths up to this depth; deeper values report their nearest ancestor.
#: Keeps position bookkeeping linear in the nodes (a spec's own keys are at most 7 deep).
POSITION_DEPTH = 16

FORMATS = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}


@dataclass
class SourceDoc:
    """Parsed spec data plus where each piece of it came from."""

    file: str
    format: str
    data: Any
    positions: dict[KeyPath, Position] = field(default_factory=dict)
    key_positions: dict[KeyPath, Position] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: Paths whose value came from a YAML alias or ``<<`` merge -> where that value is written.
    aliases: dict[KeyPath, KeyPath] = field(default_factory=dict)
    #: The text parsed, and the [start, end) indices in it of every string in which ``#`` is
    #: text (quoted scalars and block scalars of YAML, all strings of TOML), in file order.
    text: str = field(default="", repr=False)
    strings: list[tuple[int, int]] = field(default_factory=list, repr=False)

    def comments(self, word: str, limit: int) -> list[Comment]:
        """The comments that contain ``word`` (any case), at most ``limit`` + 1 of them (one
        more than ``limit`` tells the caller there are too many).

        Found from the occurrences of ``word``, so the cost is one pass over the text plus
        the length of the lines that hold it: the comment of a line starts at its first ``#``
        outside a string (in YAML, a ``#`` at the start of the line or after a blank).
        """
        text = self.text
        search = re.compile(re.escape(word), re.IGNORECASE).search
        match = search(text)
        if match is None:
            return []  # the common case: no line tables built
        found: list[Comment] = []
        lines = _Lines(text)
        starts = [start for start, _ in self.strings]
        while match is not None and len(found) <= limit:
            line, _ = lines.at(match.start())
            begin = lines.starts[line - 1]
            end = lines.starts[line] if line < len(lines.starts) else len(text)
            hash_at = self._comment_start(begin, match.start(), starts)
            if hash_at is not None:
                body = text[hash_at + 1 : end].rstrip("\r\n")
                alone = not text[begin:hash_at].strip()
                found.append(Comment(line, hash_at - begin + 1, body, alone))
            match = search(text, max(end, match.end()))
        return found

    def _comment_start(self, begin: int, before: int, starts: list[int]) -> int | None:
        """Index of the ``#`` that starts a comment on the line from ``begin`` and is at or
        before ``before``, else None (``before`` is in a string or in no comment)."""
        text, i = self.text, begin
        while True:
            i = text.find("#", i, before + 1)
            if i < 0:
                return None
            k = bisect.bisect_right(starts, i) - 1
            if k >= 0 and i < self.strings[k][1]:  # inside a string: go past it
                i = self.strings[k][1]
                if i > before:
                    return None
                continue
            if self.format == "toml" or i == begin or text[i - 1] in " \t":
                return i
            i += 1

    def canonical(self, path: KeyPath) -> KeyPath:
        """Where the value at ``path`` is written: a value inside an alias or merge is written
        at its anchor, so a mistake there is reported once, at the anchor, not at every use."""
        if not self.aliases:
            return path
        for _ in range(MAX_DEPTH):
            for end in range(1, len(path) + 1):
                target = self.aliases.get(path[:end])
                if target is not None:
                    path = (*target, *path[end:])
                    break
            else:
                return path
        return path

    def where(self, path: KeyPath) -> Position:
        """Position of the value at ``path``, else of its nearest ancestor that has one."""
        path = self.canonical(path)
        for end in range(len(path), -1, -1):
            pos = self.positions.get(path[:end])
            if pos is not None:
                return pos
        return (1, 1)

    def key_where(self, path: KeyPath) -> Position:
        """Position of the key that introduces ``path`` (falls back to the value position).

        A key is written in its own mapping even when its value is an alias: the key of
        ``input_dtype: *act`` is at that line, not at the anchor."""
        if not path:
            return self.where(path)
        own = self.key_positions.get((*self.canonical(path[:-1]), path[-1]))
        return own or self.where(path)

    def diagnostic(
        self,
        path: KeyPath,
        code: str,
        message: str,
        hint: str | None = None,
        *,
        at_key: bool = False,
    ) -> Diagnostic:
        line, col = self.key_where(path) if at_key else self.where(path)
        return Diagnostic(self.file, line, col, code, message, hint, key_path=path)


@dataclass(frozen=True)
class Comment:
    """A comment of a spec file: where its ``#`` is (1-based), its text after the ``#``, and
    whether it is alone on its line."""

    line: int
    column: int
    text: str
    alone: bool


def format_for(path: str | Path, explicit: str | None = None) -> str:
    """The format named explicitly, else the one implied by the file's suffix."""
    if explicit:
        if explicit not in ("yaml", "toml"):
            raise ValueError(f"unknown format {explicit!r}: use 'yaml' or 'toml'")
        return explicit
    suffix = suffix_of(path)
    if suffix not in FORMATS:
        raise ValueError(f"{path}: cannot tell the format from suffix {suffix!r}")
    return FORMATS[suffix]


def read_spec_bytes(path: str | Path) -> bytes:
    """A spec file's bytes, read safely: a regular file only (a FIFO, ``/dev/zero`` or a
    directory is refused without blocking), its size checked before reading, and never more
    than ``MAX_BYTES + 1`` bytes read (a file growing meanwhile cannot exhaust memory)."""
    file = str(path)

    def unreadable(reason: str) -> SpecError:
        return SpecError([Diagnostic(file, 1, 1, codes.UNREADABLE, f"cannot read: {reason}")])

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:
        raise unreadable(getattr(exc, "strerror", None) or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
            raise unreadable(f"not a regular file ({kind})")
        if info.st_size > MAX_BYTES:
            raise _too_large(file, info.st_size)
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise unreadable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > MAX_BYTES:
        raise _too_large(file, len(raw))
    return raw


def _too_large(file: str, size: int) -> SpecError:
    return SpecError(
        [
            Diagnostic(
                file,
                1,
                1,
                codes.TOO_LARGE,
                f"file is {size} bytes; the limit is {MAX_BYTES}",
                "split the spec, or use extends for shared parts",
            )
        ]
    )


def decode(raw: bytes, file: str) -> str:
    """UTF-8 (with or without BOM) or a SpecError pointing at the first bad byte."""
    if len(raw) > MAX_BYTES:
        raise _too_large(file, len(raw))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            [
                Diagnostic(
                    file,
                    line,
                    col,
                    codes.BAD_ENCODING,
                    f"invalid UTF-8 byte 0x{raw[exc.start]:02x}",
                )
            ]
        ) from None
    return text


def read_text(path: Path) -> str:
    """A spec file's text, read as every command reads it (:func:`read_spec_bytes`): SpecError
    when it cannot be read, is not a regular file, is too large or is not UTF-8."""
    return decode(read_spec_bytes(path), str(path))


def parse(text: str, file: str, fmt: str, *, recover: bool = False) -> SourceDoc:
    """Parse spec text of the given format; raises SpecError on syntax problems.

    Problems that leave usable data (a duplicate key: the first value is kept) are raised
    too, unless ``recover``: then they stay in ``doc.diagnostics`` for the caller to report
    with everything else it finds.
    """
    bad = _first_control_char(text)
    if bad is not None:
        line, col, char = bad
        raise SpecError(
            [
                Diagnostic(
                    file,
                    line,
                    col,
                    codes.BAD_ENCODING,
                    f"control character U+{ord(char):04X} in text",
                )
            ]
        )
    hidden = _INVISIBLE.search(text)
    if hidden is not None:
        raise SpecError([_invisible(text, hidden.start(), file)])
    doc = _parse_yaml(text, file) if fmt == "yaml" else _parse_toml(text, file)
    doc.text = text
    if doc.diagnostics and not recover:
        raise SpecError(doc.diagnostics)
    return doc


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _first_control_char(text: str) -> tuple[int, int, str] | None:
    match = _CONTROL.search(text)
    if match is None:
        return None
    return (*_line_col(text, match.start()), match.group())


#: Characters an editor and the parser read differently, refused anywhere in the file (a
#: comment included): NEL, U+2028 and U+2029 end a line in an editor (and in YAML 1.1) but
#: are text in YAML 1.2 and TOML, so what looks like a line of its own after one in a comment
#: is never read; the bidi embeddings, overrides and isolates reorder what an editor shows
#: (the "Trojan Source" attack). An escape in a quoted string (``"\u2028"``) is fine.
_INVISIBLE = re.compile("[\x85\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_INVISIBLE_NAMES = {
    "\x85": "an invisible line break (NEL)",
    "\u2028": "an invisible line break (LINE SEPARATOR)",
    "\u2029": "an invisible line break (PARAGRAPH SEPARATOR)",
}


def _invisible(text: str, index: int, file: str) -> Diagnostic:
    char = text[index]
    line, col = _line_col(text, index)
    what = _INVISIBLE_NAMES.get(char, "a bidi control")
    shows = (
        "an editor starts a new line here that the parser does not see"
        if char in _INVISIBLE_NAMES
        else "an editor shows the text around it in another order than the parser reads it"
    )
    return Diagnostic(
        file,
        line,
        col,
        codes.INVISIBLE_CHARACTER,
        f"{what}, U+{ord(char):04X}: {shows}",
    )


# --------------------------------------------------------------------------------------------
# YAML


def _parse_yaml(text: str, file: str) -> SourceDoc:
    doc = SourceDoc(file, "yaml", None)
    try:
        doc.data = _YamlComposer(text, doc).compose()
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = _mark_position(text, mark) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            problem = f"{problem} ({exc.context})"
        raise SpecError(
            [Diagnostic(file, line, col, codes.SYNTAX, f"YAML syntax error: {problem}")]
        ) from None
    except ReaderError as exc:
        line, col = _line_col(text, exc.position)
        char = exc.character
        code = ord(char) if isinstance(char, str) else int(char)
        raise SpecError(
            [
                Diagnostic(
                    file, line, col, codes.BAD_ENCODING, f"character U+{code:04X} is not allowed"
                )
            ]
        ) from None
    except YAMLError as exc:
        raise SpecError([Diagnostic(file, 1, 1, codes.SYNTAX, f"YAML error: {exc}")]) from None
    except _Abort as exc:
        raise SpecError([exc.diagnostic]) from None
    return doc


def _line_col(text: str, index: int) -> Position:
    """1-based line and column of ``text[index]``; lines end at ``\n``, ``\r\n`` or ``\r``
    (as editors count them; the line breaks they count and parsers do not are refused)."""
    return _Lines(text).at(index)


_BREAK = re.compile(r"\r\n?|\n")
#: A lone CR, which libyaml counts as a line end and our line table must too: when present,
#: positions are remapped by index.
_ODD_BREAKS = re.compile("\r")


class _Lines:
    """Line starts of a text, for index -> (line, column) in O(log lines)."""

    def __init__(self, text: str):
        self.starts = [0, *(m.end() for m in _BREAK.finditer(text))]

    def at(self, index: int) -> Position:
        line = bisect.bisect_right(self.starts, index)
        return line, index - self.starts[line - 1] + 1


def _mark_position(text: str, mark: Any) -> Position:
    index = getattr(mark, "index", None)
    if isinstance(index, int) and _ODD_BREAKS.search(text):
        return _line_col(text, index)
    return mark.line + 1, mark.column + 1


class _Abort(Exception):
    """A problem that stops composition at once (bounds, tags)."""

    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?[0-9]+$")
_OCT = re.compile(r"^0o[0-7]+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(?:inf|Inf|INF)$")
_NAN = re.compile(r"^\.(?:nan|NaN|NAN)$")


_MAYBE_NOT_STRING = frozenset("~nNtTfF0123456789+-.")
_LONG_NUMBER = re.compile(r"[-+]?(?:0[xo])?[0-9a-fA-F.eE+-]*$")


def _plain_scalar(value: str) -> Any:
    """Resolve a plain YAML scalar with the YAML 1.2 core schema."""
    if value and value[0] not in _MAYBE_NOT_STRING:
        return value  # the common case: a name such as nn.Conv2d
    if len(value) > MAX_NUMBER_CHARS and _LONG_NUMBER.match(value):
        raise ValueError("number too long")
    if _NULL.match(value):
        return None
    if value in _BOOL:
        return _BOOL[value]
    if _INT.match(value):
        return int(value)
    if _OCT.match(value):
        return int(value[2:], 8)
    if _HEX.match(value):
        return int(value[2:], 16)
    if _FLOAT.match(value):
        return float(value)
    if _INF.match(value):
        return -math.inf if value.startswith("-") else math.inf
    if _NAN.match(value):
        return math.nan
    return value


@dataclass
class _Frame:
    """A collection being built, with what is needed to finish it."""

    value: dict | list
    path: KeyPath
    size: int = 1
    height: int = 1  # levels of collections, this one included
    pending_key: Any = None
    key_pos: Position | None = None
    merges: list[tuple[Any, Position, KeyPath]] = field(default_factory=list)
    anchor: str | None = None


_MISSING = object()


class _YamlComposer:
    """Builds plain data from ruamel's C event stream, recording positions as it goes."""

    def __init__(self, text: str, doc: SourceDoc):
        self.parser = CParser(text)
        self.text = text
        self.doc = doc
        self.anchors: dict[str, tuple[Any, int, KeyPath, int]] = {}  # +nodes, origin, height
        self.nodes = 0
        self.lines = _Lines(text) if _ODD_BREAKS.search(text) else None

    def abort(self, pos: Position, code: str, message: str, hint: str | None = None) -> _Abort:
        return _Abort(Diagnostic(self.doc.file, pos[0], pos[1], code, message, hint))

    def compose(self) -> Any:
        """One pass over the event stream; the hot path is a scalar inside a collection."""
        result: Any = _MISSING
        stack: list[_Frame] = []
        documents = 0
        get_event = self.parser.get_event
        positions = self.doc.positions
        while True:
            event = get_event()
            cls = type(event)
            mark = event.start_mark
            if self.lines is None:
                pos = (mark.line + 1, mark.column + 1)
            else:
                pos = self.lines.at(mark.index)
            if cls is ScalarEvent:
                if event.tag is not None:
                    self._check_tag(event, pos)
                self._count(1, pos)
                value = self._scalar(event, pos)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (
                        value,
                        1,
                        self._child_path(stack[-1] if stack else None),
                        0,
                    )
                if not stack:
                    result = value
                    positions[()] = pos
                    continue
                parent = stack[-1]
                parent.size += 1
                if isinstance(parent.value, dict) and parent.pending_key is None:
                    self._take_key(parent, value, pos)
                else:
                    self._attach(parent, value, self._child_path(parent), pos)
                continue
            if cls is MappingEndEvent or cls is SequenceEndEvent:
                frame = stack.pop()
                if isinstance(frame.value, dict):
                    self._apply_merges(frame)
                if frame.anchor is not None:
                    self.anchors[frame.anchor] = (frame.value, frame.size, frame.path, frame.height)
                if stack:
                    stack[-1].size += frame.size
                    stack[-1].height = max(stack[-1].height, frame.height + 1)
                    self._attach(stack[-1], frame.value, frame.path, None)
                else:
                    result = frame.value
                continue
            if cls is MappingStartEvent or cls is SequenceStartEvent:
                self._check_tag(event, pos)
                self._count(1, pos)
                parent = stack[-1] if stack else None
                if len(stack) >= MAX_DEPTH:
                    raise self.abort(pos, codes.TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels")
                in_mapping = parent is not None and isinstance(parent.value, dict)
                if in_mapping and parent.pending_key is None:
                    raise self.abort(pos, codes.BAD_KEY, "a mapping key must be a plain scalar")
                path = self._child_path(parent)
                if len(path) <= POSITION_DEPTH:
                    positions[path] = pos
                container: dict | list = {} if cls is MappingStartEvent else []
                stack.append(_Frame(container, path, anchor=event.anchor))
                continue
            if cls is AliasEvent:
                value, size, origin, height = self._alias(event, pos)
                self._count(size, pos)
                if len(stack) + height > MAX_DEPTH:  # an alias must not dodge the depth limit
                    raise self.abort(pos, codes.TOO_DEEP, f"nesting deeper than {MAX_DEPTH} levels")
                if not stack:
                    result = value
                    continue
                parent = stack[-1]
                parent.size += size
                parent.height = max(parent.height, height + 1)
                path = self._child_path(parent)
                if parent.pending_key is not None or isinstance(parent.value, list):
                    self.doc.aliases[path] = origin
                self._attach(parent, value, path, pos)
                continue
            if cls is DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise self.abort(
                        pos,
                        codes.SYNTAX,
                        "more than one YAML document",
                        "keep one backend per file",
                    )
            elif cls is StreamEndEvent:
                return None if result is _MISSING else result

    def _check_tag(self, event: Any, pos: Position) -> None:
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise self.abort(
                pos,
                codes.YAML_TAG,
                f"YAML tag {tag!r} is not allowed",
            )

    def _count(self, size: int, pos: Position) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise self.abort(
                pos,
                codes.TOO_LARGE,
                f"document expands to more than {MAX_NODES} nodes",
                "a spec has a few thousand; split the file, and write out aliases that nest "
                "other aliases (they multiply)",
            )

    def _alias(self, event: Any, pos: Position) -> tuple[Any, int, KeyPath, int]:
        if event.anchor not in self.anchors:
            raise self.abort(pos, codes.SYNTAX, f"unknown alias *{event.anchor}")
        return self.anchors[event.anchor]

    def _scalar(self, event: Any, pos: Position) -> Any:
        value = event.value
        if len(value) > MAX_SCALAR_CHARS:
            raise self.abort(
                pos, codes.TOO_LARGE, f"scalar longer than {MAX_SCALAR_CHARS} characters"
            )
        if event.style not in ("", None):
            self._string_span(event)
            return value
        try:
            return _plain_scalar(value)
        except ValueError:
            raise self.abort(
                pos,
                codes.TOO_LARGE,
                f"number literal longer than {MAX_NUMBER_CHARS} characters",
                "spec numbers are small: bounds, indices, counts",
            ) from None

    def _string_span(self, event: Any) -> None:
        """Note where a quoted or block scalar is: a ``#`` in it is text, not a comment. A
        block scalar's text starts on the line after its ``|`` or ``>`` (a comment may end
        that line)."""
        start, end = event.start_mark.index, event.end_mark.index
        if event.style in ("|", ">"):
            newline = self.text.find("\n", start, end)
            start = end if newline < 0 else newline
        self.doc.strings.append((start, end))

    @staticmethod
    def _child_path(parent: _Frame | None) -> KeyPath:
        if parent is None:
            return ()
        if isinstance(parent.value, list):
            return (*parent.path, len(parent.value))
        if parent.pending_key is None:
            return parent.path
        return (*parent.path, parent.pending_key)

    def _attach(self, parent: _Frame, value: Any, path: KeyPath, pos: Position | None) -> None:
        if isinstance(parent.value, list):
            parent.value.append(value)
            if pos is not None and len(path) <= POSITION_DEPTH:
                self.doc.positions.setdefault(path, pos)
            return
        if parent.pending_key is None:  # this value is a key
            self._take_key(parent, value, pos or (1, 1))
            return
        key, key_pos = parent.pending_key, parent.key_pos
        parent.pending_key = None
        if key == "<<" and isinstance(value, (dict, list)):
            parent.merges.append((value, key_pos or (1, 1), self.doc.aliases.get(path, path)))
            return
        if pos is not None and len(path) <= POSITION_DEPTH:
            self.doc.positions.setdefault(path, pos)
        parent.value[key] = value

    def _take_key(self, parent: _Frame, key: Any, pos: Position) -> None:
        if isinstance(key, (dict, list)) or key is None:
            raise self.abort(pos, codes.BAD_KEY, "a mapping key must be a plain scalar")
        if isinstance(key, float):
            raise self.abort(pos, codes.BAD_KEY, f"a mapping key must not be a float ({key!r})")
        path = (*parent.path, key)
        if key in parent.value and key != "<<":
            first = self.doc.key_positions.get(path, (0, 0))
            self.doc.diagnostics.append(
                Diagnostic(
                    self.doc.file,
                    pos[0],
                    pos[1],
                    codes.DUPLICATE_KEY,
                    f"duplicate key {key!r} (first at line {first[0]})",
                )
            )
            key = _DuplicateKey(key)
        elif len(path) <= POSITION_DEPTH:
            self.doc.key_positions[path] = pos
        parent.pending_key = key
        parent.key_pos = pos

    def _apply_merges(self, frame: _Frame) -> None:
        target = frame.value
        assert isinstance(target, dict)
        for key in [k for k in target if isinstance(k, _DuplicateKey)]:
            del target[key]
        aliases = self.doc.aliases
        for value, pos, origin in frame.merges:
            sources = [(value, origin)]
            if isinstance(value, list):
                sources = [
                    (v, aliases.get((*origin, i), (*origin, i))) for i, v in enumerate(value)
                ]
            for source, source_path in sources:
                if not isinstance(source, dict):
                    raise self.abort(pos, codes.BAD_KEY, "'<<' merges only mappings")
                for key, item in source.items():
                    if key not in target:
                        target[key] = item
                        aliases[(*frame.path, key)] = (*source_path, key)


class _DuplicateKey:
    """Stands in for a duplicate key so that its value is parsed, reported once, and dropped."""

    def __init__(self, key: Any):
        self.key = key


# --------------------------------------------------------------------------------------------
# TOML

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
#: Characters that may start a node in TOML: a pre-count bounds the work before tomllib runs.
#: tomllib keeps more per node than the YAML composer (and the count is an upper bound), so
#: TOML's cap is lower: 200,000 keys and elements stay within 20 s and 500 MB, 500,000 did not.
_TOML_NODE = re.compile(r"[,=\[{]")
MAX_TOML_NODES = 200_000
_TOML_DEEP = re.compile(r"(?:[\[{][ \t\r\n]*){" + str(MAX_DEPTH) + "}")
_LONG_DIGITS = re.compile(r"[0-9_]{" + str(MAX_NUMBER_CHARS) + ",}")
#: Integers above this many bits are refused (about 120 decimal digits).
_MAX_INT_BITS = 400


def _parse_toml(text: str, file: str) -> SourceDoc:
    lines = _Lines(text)

    def fail(index: int, code: str, message: str, hint: str | None = None) -> SpecError:
        line, col = lines.at(index)
        return SpecError([Diagnostic(file, line, col, code, message, hint)])

    crossing = _nth_match(_TOML_NODE, text, MAX_TOML_NODES)
    if crossing is not None:
        raise fail(crossing, codes.TOO_LARGE, f"document has more than {MAX_TOML_NODES} nodes")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.search(message)
        if match:
            index = _toml_index(text, int(match.group(1)), int(match.group(2)))
        elif "end of document" in message:
            index = len(text)
        else:
            index = 0
        message = _TOML_POS.sub("", message).replace("(at end of document)", "at end of file")
        raise fail(index, codes.SYNTAX, f"TOML syntax error: {message.strip()}") from None
    except ValueError:  # an integer beyond int()'s digit limit
        long = _LONG_DIGITS.search(text)
        raise fail(
            long.start() if long else 0,
            codes.TOO_LARGE,
            f"number literal longer than {MAX_NUMBER_CHARS} characters",
        ) from None
    except RecursionError:
        deep = _TOML_DEEP.search(text)
        raise fail(deep.start() if deep else 0, codes.TOO_DEEP, "TOML nesting too deep") from None
    doc = SourceDoc(file, "toml", data)
    _TomlPositions(doc, text, lines).scan()
    problem = _tree_problem(data)
    if problem:
        # Fatal even when recovering: later stages would recurse into the value or print it
        # (a 60,000-digit hex integer cannot be converted to decimal text).
        path, code, message = problem
        raise SpecError([doc.diagnostic(path, code, message)])
    return doc


def _nth_match(pattern: re.Pattern[str], text: str, n: int) -> int | None:
    """Index of the ``n``-th match of ``pattern`` past the first ``n`` (None if fewer)."""
    for count, match in enumerate(pattern.finditer(text)):
        if count >= n:
            return match.start()
    return None


def _toml_index(text: str, line: int, col: int) -> int:
    """tomllib's (line, column), counted by ``\n`` only, as an index into ``text``."""
    start = 0
    for _ in range(line - 1):
        found = text.find("\n", start)
        if found < 0:
            break
        start = found + 1
    return min(start + col - 1, len(text))


def _tree_problem(data: Any) -> tuple[KeyPath, str, str] | None:
    """A value nested beyond MAX_DEPTH or an integer too large to print, iteratively (no
    recursion on hostile data)."""
    stack: list[tuple[Any, KeyPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path[:MAX_DEPTH], codes.TOO_DEEP, "nesting too deep"
        if isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
        elif isinstance(value, int) and abs(value).bit_length() > _MAX_INT_BITS:
            return path, codes.TOO_LARGE, f"integer of more than {_MAX_INT_BITS} bits"
    return None


_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BLANK = re.compile(r"[ \t]*")
_BLANK_LINES = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_SCALAR_END = re.compile(r"[^,\]}#\n]*")


class _TomlPositions:
    """Positions of table headers, keys and values of a parsed TOML file, in one linear pass.

    It follows TOML's lexical structure (strings of all four kinds, comments, arrays spanning
    lines), so a ``[[patterns]]`` inside a multi-line string is text, an element of a
    multi-line array gets its own line, and an escaped key is decoded as tomllib decodes it.
    tomllib has accepted the text already, so the scan needs no error handling beyond
    stopping early.
    """

    def __init__(self, doc: SourceDoc, text: str, lines: _Lines):
        self.doc = doc
        self.text = text
        self.lines = lines
        self.table: KeyPath = ()
        self.arrays: dict[tuple[str, ...], int] = {}

    def _record(self, where: dict[KeyPath, Position], path: KeyPath, index: int) -> None:
        if len(path) <= POSITION_DEPTH:
            where.setdefault(path, self.lines.at(index))

    def scan(self) -> None:
        text, i = self.text, 0
        while True:
            i = _BLANK_LINES.match(text, i).end()
            if i >= len(text):
                return
            if text[i] == "[":
                i = self._header(i)
                continue
            start = i
            parts, i = self._key(i)
            if not parts or i >= len(text) or text[i] != "=":
                return
            path = (*self.table, *parts)
            self._record(self.doc.key_positions, path, start)
            i = self._value(_BLANK.match(text, i + 1).end(), path)

    def _header(self, i: int) -> int:
        text = self.text
        is_array = text.startswith("[[", i)
        parts, end = self._key(i + (2 if is_array else 1))
        names: list[str | int] = []
        for n, name in enumerate(parts):
            names.append(name)
            plain = tuple(str(p) for p in parts[: n + 1])
            if is_array and n == len(parts) - 1:
                self.arrays[plain] = self.arrays.get(plain, -1) + 1
                names.append(self.arrays[plain])
            elif plain in self.arrays:
                names.append(self.arrays[plain])
        self.table = tuple(names)
        self._record(self.doc.positions, self.table, i)
        self._record(self.doc.key_positions, self.table, i)
        newline = text.find("\n", end)
        return len(text) if newline < 0 else newline + 1

    def _key(self, i: int) -> tuple[list[str], int]:
        """The parts of a (dotted) key starting at ``i`` and the index after it and its blanks."""
        text, parts = self.text, []
        while True:
            i = _BLANK.match(text, i).end()
            if i >= len(text):
                return parts, i
            if text[i] in "\"'":
                end = _string_end(text, i)
                self.doc.strings.append((i, end))
                parts.append(_key_text(text[i:end]))
                i = end
            else:
                bare = _BARE.match(text, i)
                if bare is None:
                    return parts, i
                parts.append(bare.group())
                i = bare.end()
            i = _BLANK.match(text, i).end()
            if i >= len(text) or text[i] != ".":
                return parts, i
            i += 1

    def _value(self, i: int, path: KeyPath) -> int:
        """Record the value at ``i`` (and, for arrays and inline tables, of every element),
        iteratively; returns the index after it."""
        text = self.text
        stack: list[list[Any]] = []  # [bracket, container path, next index]
        current = path
        while i < len(text):
            self._record(self.doc.positions, current, i)
            char = text[i]
            if char in "[{":
                stack.append([char, current, 0])
                i = _BLANK_LINES.match(text, i + 1).end()
                if i < len(text) and text[i] not in "]}":
                    current, i = self._next_item(stack[-1], i)
                    if current is None:
                        return i
                    continue
            elif char in "\"'":
                end = _string_end(text, i)
                self.doc.strings.append((i, end))
                i = end
            else:
                i = _SCALAR_END.match(text, i).end()
            while stack:  # after a value: commas and closing brackets
                i = _BLANK_LINES.match(text, i).end()
                if i >= len(text):
                    return i
                if text[i] in "]}":
                    stack.pop()
                    i += 1
                    continue
                if text[i] != ",":
                    return i
                i = _BLANK_LINES.match(text, i + 1).end()
                if i < len(text) and text[i] in "]}":
                    continue  # a trailing comma
                stack[-1][2] += 1
                current, i = self._next_item(stack[-1], i)
                if current is None:
                    return i
                break
            else:
                return i
        return i

    def _next_item(self, top: list[Any], i: int) -> tuple[KeyPath | None, int]:
        """Path of the next item of an open array or inline table, and where its value is."""
        bracket, parent, index = top
        if bracket == "[":
            return (*parent, index), i
        start = i
        parts, i = self._key(i)
        if not parts or i >= len(self.text) or self.text[i] != "=":
            return None, i
        path = (*parent, *parts)
        self._record(self.doc.key_positions, path, start)
        return path, _BLANK.match(self.text, i + 1).end()


def _string_end(text: str, i: int) -> int:
    """Index just past the TOML string starting at ``i`` (any of the four kinds)."""
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        if quote == '"':
            while end > 0 and _escaped_at(text, end):
                end = text.find(quote * 3, end + 1)
        if end < 0:
            return len(text)
        while text.startswith(quote, end + 3):  # up to two quotes may end the content
            end += 1
        return end + 3
    j = i + 1
    while j < len(text) and text[j] != quote and text[j] != "\n":
        j += 2 if quote == '"' and text[j] == "\\" else 1
    return j + 1


def _escaped_at(text: str, index: int) -> bool:
    """Whether ``text[index]`` is escaped by an odd run of backslashes."""
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _key_text(quoted: str) -> str:
    """A quoted key as tomllib reads it (escapes decoded)."""
    if quoted.startswith("'") or "\\" not in quoted:
        return quoted[1:-1]
    try:
        return str(tomllib.loads(f"k = {quoted}")["k"])
    except (tomllib.TOMLDecodeError, ValueError):
        return quoted[1:-1]
