"""Stage 1: spec text -> plain Python data, with the source position of every key and value.

YAML is read from ruamel's C event stream and composed here, so positions cost nothing extra
(the round-trip loader keeps them too, but is about eight times slower). Composing ourselves
also lets us refuse tags, report duplicate keys, and bound alias expansion and nesting depth
on hostile input. TOML is parsed by tomllib; a light scanner recovers the positions of keys,
table headers and inline values, since tomllib keeps none.
"""

from __future__ import annotations

import math
import re
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
        """Position of the key that introduces ``path`` (falls back to the value position)."""
        return self.key_positions.get(self.canonical(path)) or self.where(path)

    def diagnostic(
        self, path: KeyPath, code: str, message: str, hint: str = "", *, at_key: bool = False
    ) -> Diagnostic:
        line, col = self.key_where(path) if at_key else self.where(path)
        return Diagnostic(self.file, line, col, code, message, hint, key_path=path)


def format_for(path: str | Path, explicit: str | None = None) -> str:
    """The format named explicitly, else the one implied by the file's suffix."""
    if explicit:
        if explicit not in ("yaml", "toml"):
            raise ValueError(f"unknown format {explicit!r}: use 'yaml' or 'toml'")
        return explicit
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: cannot tell the format from suffix {suffix!r}")
    return FORMATS[suffix]


def decode(raw: bytes, file: str) -> str:
    """UTF-8 (with or without BOM) or a SpecError pointing at the first bad byte."""
    if len(raw) > MAX_BYTES:
        raise SpecError(
            [
                Diagnostic(
                    file,
                    1,
                    1,
                    codes.TOO_LARGE,
                    f"file is {len(raw)} bytes; the limit is {MAX_BYTES}",
                )
            ]
        )
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
                    "save the file as UTF-8",
                )
            ]
        ) from None
    return text


def read_text(path: Path) -> str:
    """A spec file's text, read as every command reads it: SpecError when it cannot be read,
    is too large or is not UTF-8."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(
            [Diagnostic(file, 0, 0, codes.UNREADABLE, f"cannot read: {exc.strerror or exc}")]
        ) from None
    return decode(raw, file)


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
    doc = _parse_yaml(text, file) if fmt == "yaml" else _parse_toml(text, file)
    if doc.diagnostics and not recover:
        raise SpecError(doc.diagnostics)
    return doc


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _first_control_char(text: str) -> tuple[int, int, str] | None:
    match = _CONTROL.search(text)
    if match is None:
        return None
    return (*_line_col(text, match.start()), match.group())


# --------------------------------------------------------------------------------------------
# YAML


def _parse_yaml(text: str, file: str) -> SourceDoc:
    doc = SourceDoc(file, "yaml", None)
    try:
        doc.data = _YamlComposer(text, doc).compose()
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
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
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


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


def _plain_scalar(value: str) -> Any:
    """Resolve a plain YAML scalar with the YAML 1.2 core schema."""
    if value and value[0] not in _MAYBE_NOT_STRING:
        return value  # the common case: a name such as nn.Conv2d
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
    pending_key: Any = None
    key_pos: Position | None = None
    merges: list[tuple[Any, Position, KeyPath]] = field(default_factory=list)
    anchor: str | None = None


_MISSING = object()


class _YamlComposer:
    """Builds plain data from ruamel's C event stream, recording positions as it goes."""

    def __init__(self, text: str, doc: SourceDoc):
        self.parser = CParser(text)
        self.doc = doc
        self.anchors: dict[str, tuple[Any, int, KeyPath]] = {}
        self.nodes = 0

    def abort(self, pos: Position, code: str, message: str, hint: str = "") -> _Abort:
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
            pos = (mark.line + 1, mark.column + 1)
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
                    self.anchors[frame.anchor] = (frame.value, frame.size, frame.path)
                if stack:
                    stack[-1].size += frame.size
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
                positions[path] = pos
                container: dict | list = {} if cls is MappingStartEvent else []
                stack.append(_Frame(container, path, anchor=event.anchor))
                continue
            if cls is AliasEvent:
                value, size, origin = self._alias(event, pos)
                self._count(size, pos)
                if not stack:
                    result = value
                    continue
                parent = stack[-1]
                parent.size += size
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
                "specs are plain data; remove the tag",
            )

    def _count(self, size: int, pos: Position) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise self.abort(
                pos,
                codes.TOO_LARGE,
                f"document expands to more than {MAX_NODES} nodes",
                "aliases that nest other aliases multiply; write the data out",
            )

    def _alias(self, event: Any, pos: Position) -> tuple[Any, int, KeyPath]:
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
            return value
        try:
            return _plain_scalar(value)
        except ValueError:
            raise self.abort(pos, codes.TOO_LARGE, "number too large") from None

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
            if pos is not None:
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
        if pos is not None:
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
                    "remove one of them; YAML keeps only one",
                )
            )
            key = _DuplicateKey(key)
        else:
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


def _parse_toml(text: str, file: str) -> SourceDoc:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.search(message)
        if match:
            line, col = int(match.group(1)), int(match.group(2))
        elif "end of document" in message:
            line, col = _end_of(text)
        else:
            line, col = 1, 1
        message = _TOML_POS.sub("", message).replace("(at end of document)", "at end of file")
        message = message.strip()
        raise SpecError(
            [Diagnostic(file, line, col, codes.SYNTAX, f"TOML syntax error: {message}")]
        ) from None
    except RecursionError:
        raise SpecError([Diagnostic(file, 1, 1, codes.TOO_DEEP, "TOML nesting too deep")]) from None
    doc = SourceDoc(file, "toml", data)
    _TomlPositions(doc).scan(text)
    depth_problem = _too_deep(data)
    if depth_problem:
        doc.diagnostics.append(doc.diagnostic(depth_problem, codes.TOO_DEEP, "nesting too deep"))
    return doc


def _end_of(text: str) -> Position:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _too_deep(data: Any) -> KeyPath | None:
    """The path of a value nested beyond MAX_DEPTH, iteratively (no recursion on hostile data)."""
    stack: list[tuple[Any, KeyPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            return path[:MAX_DEPTH]
        if isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
    return None


_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(?:#.*)?$")
_KEY_LINE = re.compile(
    r"^(\s*)((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=\s*"
)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'")


def _split_key(key: str) -> list[str]:
    return [part.strip("\"'") for part in _BARE_KEY.findall(key)]


class _TomlPositions:
    """Recovers positions for table headers, keys and inline values of a parsed TOML file."""

    def __init__(self, doc: SourceDoc):
        self.doc = doc
        self.table: KeyPath = ()
        self.arrays: dict[tuple[str, ...], int] = {}

    def scan(self, text: str) -> None:
        in_multiline: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if in_multiline in line:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header and not _KEY_LINE.match(line):
                self._header(header, number, line)
                continue
            key_match = _KEY_LINE.match(line)
            if not key_match:
                continue
            path = (*self.table, *_split_key(key_match.group(2)))
            self.doc.key_positions[path] = (number, len(key_match.group(1)) + 1)
            value_col = key_match.end()
            self.doc.positions[path] = (number, value_col + 1)
            rest = line[value_col:]
            for quote in ('"""', "'''"):
                if rest.startswith(quote) and rest.count(quote) == 1:
                    in_multiline = quote
            _InlineScanner(self.doc, number).scan(rest, value_col, path)

    def _header(self, match: re.Match[str], number: int, line: str) -> None:
        names = _split_key(match.group(2))
        path: list[str | int] = []
        for i, name in enumerate(names):
            path.append(name)
            plain = tuple(str(p) for p in names[: i + 1])
            is_last = i == len(names) - 1
            if match.group(1) == "[[" and is_last:
                self.arrays[plain] = self.arrays.get(plain, -1) + 1
                path.append(self.arrays[plain])
            elif plain in self.arrays:
                path.append(self.arrays[plain])
        self.table = tuple(path)
        col = line.index("[") + 1
        self.doc.positions.setdefault(self.table, (number, col))
        self.doc.key_positions.setdefault(self.table, (number, col))


class _InlineScanner:
    """Positions of the elements of one-line inline arrays and tables."""

    def __init__(self, doc: SourceDoc, line: int):
        self.doc = doc
        self.line = line

    def scan(self, text: str, offset: int, path: KeyPath) -> None:
        stack: list[tuple[KeyPath, int | None]] = []  # (path, next array index or None for table)
        i = 0
        expecting_value = True
        current = path
        while i < len(text):
            char = text[i]
            if char == "#":
                return
            if char in "[{":
                self.doc.positions.setdefault(current, (self.line, offset + i + 1))
                stack.append((current, 0 if char == "[" else None))
                expecting_value = char == "["
                if char == "[":
                    current = (*stack[-1][0], 0)
                i += 1
                continue
            if char in "]}":
                if not stack:
                    return
                stack.pop()
                i += 1
                continue
            if char == ",":
                if stack and stack[-1][1] is not None:
                    parent, index = stack[-1]
                    stack[-1] = (parent, index + 1)
                    current = (*parent, index + 1)
                    expecting_value = True
                else:
                    expecting_value = False
                i += 1
                continue
            if char.isspace():
                i += 1
                continue
            if stack and stack[-1][1] is None and not expecting_value:
                key = re.match(
                    r"((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*[A-Za-z0-9_\"'-]+)*)\s*=\s*",
                    text[i:],
                )
                if not key:
                    return
                current = (*stack[-1][0], *_split_key(key.group(1)))
                self.doc.key_positions.setdefault(current, (self.line, offset + i + 1))
                i += key.end()
                expecting_value = True
                continue
            self.doc.positions.setdefault(current, (self.line, offset + i + 1))
            i = _skip_value(text, i)
            expecting_value = False
        return


def _skip_value(text: str, i: int) -> int:
    """Index just past the scalar starting at ``i`` (a string, number, bool or date)."""
    if text[i] in "\"'":
        quote = text[i]
        j = i + 1
        while j < len(text):
            if quote == '"' and text[j] == "\\":
                j += 2
                continue
            if text[j] == quote:
                return j + 1
            j += 1
        return j
    j = i
    while j < len(text) and text[j] not in ",]}#" and not text[j].isspace():
        j += 1
    return max(j, i + 1)
