"""``bespec fmt``: a canonical layout for YAML specs, comments kept.

Keys are put in the contract's order (top level: ``spec_version, name, extends, remove,
dtype_configs, patterns``; a pattern entry: the order of the contract's key table; a dtype config:
``input/output/weight/bias_dtype, is_dynamic``; a constrained dtype: ``dtype`` then its bounds),
with 2-space indentation and indented sequences. ruamel's round-trip mode keeps comments, quoting
and flow style; a comment stays attached to the key it follows. Keys the format does not know
(``x-`` anchors homes, typos) keep their relative order: ``x-`` keys first, since they usually
define anchors used below; anything else after the known keys.

Formatting never changes meaning: the data read back from the result must equal the data read
from the input, or the file is left alone. TOML files are left as they are (``tomllib`` keeps
no comments, so TOML cannot be rewritten safely without a round-trip TOML library).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend_spec.spec.models import (
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    PatternModel,
    SpecModel,
)

# The models declare their fields in the contract's order, so the canonical order is theirs.
TOP_LEVEL = tuple(SpecModel.model_fields)
PATTERN = tuple(PatternModel.model_fields)
DTYPE_CONFIG = tuple(DTypeConfigModel.model_fields)
CONSTRAINED_DTYPE = tuple(DTypeWithConstraintsModel.model_fields)

#: Line width of emitted YAML (the project's line length); longer flow collections wrap.
WIDTH = 100

TOML_NOTE = "fmt supports YAML; TOML files are left as they are"


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
    changed: bool
    skipped: str = ""  # why the file was left alone (TOML)


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    return yaml


def _reorder(mapping: Any, order: tuple[str, ...], first_prefix: str | None = None) -> None:
    """Put a CommentedMap's keys in ``order`` (in place, so comments stay with their keys).

    Keys starting with ``first_prefix`` come first; unknown keys after the known ones; each
    group keeps its original relative order.
    """
    keys = list(mapping)
    leading = [k for k in keys if first_prefix and str(k).startswith(first_prefix)]
    known = [k for k in order if k in mapping]
    rest = [k for k in keys if k not in leading and k not in known]
    for key in (*leading, *known, *rest):
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
    """Reorder a round-trip document in place into the canonical key order."""
    if not _is_map(data):
        return
    _reorder(data, TOP_LEVEL, first_prefix="x-")
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


def format_text(text: str, file: str = "<string>") -> str:
    """The canonical form of YAML spec text (FormatError if it cannot be formatted safely).

    The text first goes through the loader's own reader, under the same limits (size, nodes,
    depth, aliases, tags): a file compile refuses is refused here too, never rewritten, and
    ruamel's round-trip reader never sees an alias bomb.
    """
    from ruamel.yaml.error import YAMLError

    from backend_spec.diagnostics import SpecError
    from backend_spec.spec.source import parse

    try:
        parse(text, file, "yaml")
    except SpecError as error:
        first = error.diagnostics[0]
        raise FormatError(f"line {first.line}: {first.code} {first.message}", first) from None
    yaml = _yaml()
    try:
        data = yaml.load(text)
    except YAMLError as exc:
        raise FormatError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    canonicalize(data)
    out = io.StringIO()
    yaml.dump(data, out)
    # ruamel leaves a space at the end of wrapped flow lines; the data check below guards
    # the (rare) block scalar whose trailing spaces are content.
    result = "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())
    _check_same_data(text, result)
    return result


def _plain(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


def _check_same_data(before: str, after: str) -> None:
    """Refuse a result whose data differs from the input's (mappings compare unordered)."""
    try:
        same = _plain(before) == _plain(after)
    except Exception:  # a YAML feature the safe loader refuses: do not risk it
        same = False
    if not same:
        raise FormatError("formatting would change the data; file left as it is")


def format_path(path: Path, check: bool = False) -> Outcome:
    """Format one spec file in place (atomically), or with ``check`` only tell if it would
    change. TOML files are skipped with :data:`TOML_NOTE`."""
    from backend_spec.diagnostics import SpecError
    from backend_spec.files import write_atomic
    from backend_spec.spec.source import decode, read_spec_bytes

    if path.suffix.lower() == ".toml":
        return Outcome(path, False, TOML_NOTE)
    try:
        text = decode(read_spec_bytes(path), str(path))
    except SpecError as error:
        first = error.diagnostics[0]
        raise FormatError(f"line {first.line}: {first.code} {first.message}", first) from None
    result = format_text(text, str(path))
    changed = result != text
    if changed and not check:
        write_atomic(path, result)
    return Outcome(path, changed)
