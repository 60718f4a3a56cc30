"""``bespec fmt``: a canonical layout for YAML and TOML specs, comments kept.

Keys are put in the format's order (top level: ``spec_version, name, extends, remove,
dtype_configs, patterns``; a pattern entry: the order of its key table in docs/format.md; a
dtype config: ``input/output/weight/bias_dtype, is_dynamic``; a constrained dtype: ``dtype``
then its bounds). A comment stays with the key it precedes (YAML: the key it follows, as ruamel
attaches it), and runs of blank lines become one.

Top-level ``x-`` keys (homes of YAML anchors) stay where they were written: each is kept just
before the first of the known keys that followed it, so an anchor still comes before every
alias of it. Other unknown keys keep their relative order after the known ones.

YAML goes through ruamel's round-trip mode (2-space indentation, indented sequences); TOML
through tomlkit (tables and arrays of tables stay where TOML needs them; inline tables are
rewritten in order). Files are read through the loader's capped reader, and formatting never
changes meaning: the data read back from the result must equal the data read from the input,
or the file is left alone.
"""

from __future__ import annotations

import difflib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend_spec.specfile.models import (
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    PatternModel,
    SpecModel,
)

# The models declare their fields in the format's order, so the canonical order is theirs.
TOP_LEVEL = tuple(SpecModel.model_fields)
PATTERN = tuple(PatternModel.model_fields)
DTYPE_CONFIG = tuple(DTypeConfigModel.model_fields)
CONSTRAINED_DTYPE = tuple(DTypeWithConstraintsModel.model_fields)

#: Line width of emitted YAML (the project's line length); longer flow collections wrap.
WIDTH = 100

_BLANK_RUNS = re.compile(r"\n{3,}")


class FormatError(Exception):
    """The file cannot be formatted (not YAML we can read, or formatting would change it).

    ``diagnostic`` is set when the loader's reader refused the text (a limit, a tag...)."""

    def __init__(self, message: str, diagnostic: Any = None):
        super().__init__(message)
        self.diagnostic = diagnostic


@dataclass(frozen=True)
class Outcome:
    """What fmt did (or would do) with one file."""

    path: Path
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff from the file as it is to the file formatted."""
        name = str(self.path)
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=name,
            tofile=f"{name} (formatted)",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def canonical_keys(keys: list[Any], order: tuple[str, ...], anchored_prefix: str | None) -> list:
    """``keys`` in canonical order: known keys in ``order``, unknown ones after them; keys
    starting with ``anchored_prefix`` each just before the first (in the result) of the other
    keys that followed it, or at the end when none did. Linear in the number of keys."""
    present = set(keys)
    known = [k for k in order if k in present]
    known_set = set(known)
    unknown = [k for k in keys if k not in known_set and not _anchored(k, anchored_prefix)]
    base = [*known, *unknown]
    rank = {key: position for position, key in enumerate(base)}
    before: dict[int, list[Any]] = {}  # slot in base -> anchored keys that go just before it
    first_later = len(base)
    for key in reversed(keys):
        if _anchored(key, anchored_prefix):
            before.setdefault(first_later, []).append(key)  # reversed: undone below
        else:
            first_later = min(first_later, rank[key])
    result = []
    for position, key in enumerate(base):
        result += [*reversed(before.get(position, ())), key]
    return result + list(reversed(before.get(len(base), [])))


def _anchored(key: Any, prefix: str | None) -> bool:
    return prefix is not None and isinstance(key, str) and key.startswith(prefix)


def _tidy(text: str) -> str:
    """No trailing spaces, no runs of blank lines, no blank lines at the ends."""
    text = "\n".join(line.rstrip() for line in text.splitlines())
    return _BLANK_RUNS.sub("\n\n", text).strip("\n") + "\n"


# -- YAML --------------------------------------------------------------------------------------


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    return yaml


def _reorder(mapping: Any, order: tuple[str, ...], anchored_prefix: str | None = None) -> None:
    """Put a CommentedMap's keys in canonical order (in place, so comments stay with keys)."""
    for key in canonical_keys(list(mapping), order, anchored_prefix):
        mapping.move_to_end(key)


def _is_map(value: Any) -> bool:
    from ruamel.yaml.comments import CommentedMap

    return isinstance(value, CommentedMap)


def _reorder_dtype_config(config: Any) -> None:
    if not _is_map(config):
        return
    _reorder(config, DTYPE_CONFIG)
    for key in DTYPE_CONFIG[:4]:
        if _is_map(config.get(key)):
            _reorder(config[key], CONSTRAINED_DTYPE)


def canonicalize(data: Any) -> None:
    """Reorder a round-trip YAML document in place into the canonical key order."""
    if not _is_map(data):
        return
    _reorder(data, TOP_LEVEL, anchored_prefix="x-")
    named = data.get("dtype_configs")
    if _is_map(named):
        for config in named.values():
            _reorder_dtype_config(config)
    patterns = data.get("patterns")
    if isinstance(patterns, list):
        for entry in patterns:
            if not _is_map(entry):
                continue
            _reorder(entry, PATTERN)
            refs = entry.get("dtype_configs")
            for ref in refs if isinstance(refs, list) else ():
                _reorder_dtype_config(ref)


def _within_limits(text: str, file: str, fmt: str) -> None:
    """Read the text with the loader's own reader first, under the same limits (size, nodes,
    depth, aliases, tags): a file compile refuses is refused here too, never rewritten, and
    the round-trip readers never see an alias bomb."""
    from backend_spec.specfile.source import parse

    _as_format_error(lambda: parse(text, file, fmt))


def _as_format_error(read: Any) -> Any:
    """``read()``, its SpecError as a FormatError naming the first problem."""
    from backend_spec.diagnostics import SpecError

    try:
        return read()
    except SpecError as error:
        first = error.diagnostics[0]
        raise FormatError(f"line {first.line}: {first.code} {first.message}", first) from None


def format_text(text: str, file: str = "<string>") -> str:
    """The canonical form of YAML spec text (FormatError if it cannot be formatted safely)."""
    from ruamel.yaml.error import YAMLError

    # the loader's reader first: its limits, and the characters it refuses (NEL, U+2028 and
    # U+2029, which ruamel would take for line ends, among them)
    _within_limits(text, file, "yaml")
    yaml = _yaml()
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise FormatError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    canonicalize(data)
    out = io.StringIO()
    yaml.dump(data, out)
    # ruamel leaves a space at the end of wrapped flow lines, and moved keys bring their blank
    # lines along; the data check below guards the (rare) block scalar where those are content.
    result = _tidy(out.getvalue())
    _check_same_data(text, result, _plain_yaml)
    return result


def _plain_yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


# -- TOML --------------------------------------------------------------------------------------


def format_toml_text(text: str, file: str = "<string>") -> str:
    """The canonical form of TOML spec text, comments kept (FormatError if unsafe)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    _within_limits(text, file, "toml")
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise FormatError(f"not valid TOML: {exc}") from None
    # Find every container first: reordering a body makes tomlkit's key index stale.
    jobs: list[tuple[Any, tuple[str, ...], str | None]] = [(doc, TOP_LEVEL, "x-")]
    named = doc.get("dtype_configs")
    if isinstance(named, dict):
        jobs += [(config, DTYPE_CONFIG, None) for config in named.values()]
    patterns = doc.get("patterns")
    for entry in patterns if isinstance(patterns, list) else ():
        if isinstance(entry, dict):
            jobs.append((entry, PATTERN, None))
            refs = entry.get("dtype_configs")
            jobs += [(r, DTYPE_CONFIG, None) for r in refs or () if isinstance(r, dict)]
    for container, order, prefix in jobs:
        _reorder_toml(container, order, prefix)
    result = _tidy(doc.as_string())
    _check_same_data(text, result, _plain_toml)
    return result


def _reorder_toml(container: Any, order: tuple[str, ...], prefix: str | None) -> None:
    """Reorder the plain keys of a tomlkit table (or document) in place. A key moves with the
    comments and blank lines just above it, except the file's header comment; tables and
    arrays of tables stay where they are (TOML puts them after the plain keys)."""
    from tomlkit.items import AoT, InlineTable, Table

    if isinstance(container, InlineTable):
        _reorder_inline(container, order)
        return
    body = container.value.body if isinstance(container, Table) else container.body
    chunks: dict[str, list[tuple[Any, Any]]] = {}
    pending: list[tuple[Any, Any]] = []
    header: list[tuple[Any, Any]] = []
    tail: list[tuple[Any, Any]] = []
    for key, item in body:
        if key is None:
            pending.append((key, item))
        elif isinstance(item, (Table, AoT)) or tail:
            tail += [*pending, (key, item)]
            pending = []
        else:
            if not chunks and not header:
                header, pending = pending, []
            chunks[key.key] = [*pending, (_spaced(key), item)]
            pending = []
    ordered = canonical_keys(list(chunks), order, prefix)
    body[:] = [*header, *(pair for k in ordered for pair in chunks[k]), *tail, *pending]
    if order is DTYPE_CONFIG:
        _reorder_constrained(body)


def _spaced(key: Any) -> Any:
    """The key written ``key = value`` (one space each side of ``=``), quoting kept."""
    from tomlkit.items import SingleKey

    return SingleKey(key.key, t=key.t, sep=" = ") if isinstance(key, SingleKey) else key


def _reorder_constrained(body: list) -> None:
    """Constrained dtypes written inline (``input_dtype = { dtype = ... }``) of a dtype config."""
    from tomlkit.items import InlineTable

    for key, item in body:
        if key is not None and key.key in DTYPE_CONFIG[:4] and isinstance(item, InlineTable):
            _reorder_inline(item, CONSTRAINED_DTYPE)


def _reorder_inline(table: Any, order: tuple[str, ...]) -> None:
    """Rewrite an inline table's body as ``{ key = value, ... }`` in canonical order (an inline
    table holds no comments, so nothing is lost)."""
    import tomlkit
    from tomlkit.items import Whitespace

    body = table.value.body
    pairs = {key.key: (key, item) for key, item in body if key is not None}
    keys = canonical_keys(list(pairs), order, None)
    new: list[tuple[Any, Any]] = [(None, Whitespace(" "))]
    for index, key in enumerate(keys):
        item = pairs[key][1]
        item.trivia.indent = ""
        new += [
            (tomlkit.key(key), item),
            (None, Whitespace(", " if index < len(keys) - 1 else " ")),
        ]
    body[:] = new
    if order is DTYPE_CONFIG:
        _reorder_constrained(body)


def _plain_toml(text: str) -> Any:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(text)


# -- both --------------------------------------------------------------------------------------


def _check_same_data(before: str, after: str, plain: Any) -> None:
    """Refuse a result whose data differs from the input's (mappings compare unordered)."""
    try:
        same = plain(before) == plain(after)
    except Exception:  # a feature the plain reader refuses: do not risk it
        same = False
    if not same:
        raise FormatError("formatting would change the data; file left as it is")


def format_path(path: Path, check: bool = False) -> Outcome:
    """Format one spec file in place (atomically), or with ``check`` only tell if it would
    change. The file is read as the loader reads it (regular file, size cap, encoding)."""
    from backend_spec.diagnostics import SpecError
    from backend_spec.files import write_atomic
    from backend_spec.specfile.source import format_for, read_text

    try:
        fmt = format_for(path)
        text = read_text(path)
    except ValueError as exc:
        raise FormatError(str(exc)) from None
    except SpecError as error:
        first = error.diagnostics[0]
        raise FormatError(f"line {first.line}: {first.code} {first.message}", first) from None
    formatter = format_toml_text if fmt == "toml" else format_text
    result = formatter(text, str(path))
    outcome = Outcome(path, text, result)
    if outcome.changed and not check:
        write_atomic(path, result)
    return outcome
