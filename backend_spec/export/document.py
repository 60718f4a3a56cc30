"""Export stage 3: a BackendConfig as a plain spec document (dicts, lists, str, int, float, bool).

The document is format-neutral: the YAML and TOML emitters only lay it out. Every object is
named here, so every naming failure is found here too, all of them in one pass, and reported
as one :class:`~backend_spec.SpecError` instead of a half-written file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec import codes
from backend_spec._torch import BackendConfig, BackendPatternConfig, ObservationType
from backend_spec.build.observed import pattern_aten, pattern_quantize
from backend_spec.diagnostics import Diagnostic, SpecError, format_key_path
from backend_spec.export.dtypes import DTypeConfigTable, DTypeDoc
from backend_spec.export.families import family_of
from backend_spec.names.fusers import sequential_class
from backend_spec.names.labels import pattern_label, qualified_name
from backend_spec.names.naming import object_name, observation_type_name, op_name
from backend_spec.spec.fields import MODULE_KINDS, PATTERN_FIELDS, FieldKind
from backend_spec.spec.models import OBSERVER_FIELDS, PT2E_PATTERN_FIELDS

_DEFAULT_OBSERVATION = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT


@dataclass
class SpecDocument:
    """A spec file's content. ``families`` labels each pattern for the YAML group comments."""

    name: str
    dtype_configs: dict[str, DTypeDoc] = field(default_factory=dict)
    patterns: list[dict[str, Any]] = field(default_factory=list)
    families: list[str] = field(default_factory=list)

    @property
    def spec_version(self) -> int:
        """1 unless a version 2 key is used."""
        return 2 if _uses_version_2(self.dtype_configs, self.patterns) else 1

    def to_dict(self) -> dict[str, Any]:
        """The document as the loader reads it (key order as written)."""
        out: dict[str, Any] = {"spec_version": self.spec_version, "name": self.name}
        if self.dtype_configs:
            out["dtype_configs"] = self.dtype_configs
        out["patterns"] = self.patterns
        return out


def _uses_version_2(dtype_configs: dict[str, Any], patterns: list[dict[str, Any]]) -> bool:
    """Whether the document holds a version 2 key (then it must say ``spec_version: 2``)."""
    if any(key in entry for entry in patterns for key in PT2E_PATTERN_FIELDS):
        return True
    mappings = [*dtype_configs.values()] + [
        ref for entry in patterns for ref in entry.get("dtype_configs", []) if isinstance(ref, dict)
    ]
    return any(
        isinstance(value, dict) and any(key in value for key in OBSERVER_FIELDS)
        for mapping in mappings
        for value in mapping.values()
    )


class _Unnameable(Exception):
    """Raised inside the builder; collected into one diagnostic per offending field."""


def _name(obj: Any, namer: Callable[[Any], str | None] = object_name) -> str:
    name = namer(obj)
    if name is None:
        raise _Unnameable(obj)
    return name


def _nested_names(pattern: Any) -> Any:
    """Names of a pattern in torch's nested tuple format, as nested lists."""
    if isinstance(pattern, tuple):
        return [_nested_names(p) for p in pattern]
    return _name(pattern, op_name)


def _fuser_doc(fuser: Callable[..., Any]) -> str | dict[str, str]:
    cls = sequential_class(fuser)
    return _name(fuser) if cls is None else {"sequential": _name(cls)}


@dataclass
class _EntryBuilder:
    """Builds the entry of one pattern; a value it cannot write becomes a diagnostic."""

    index: int
    config: BackendPatternConfig
    table: DTypeConfigTable
    source: str
    diagnostics: list[Diagnostic]
    entry: dict[str, Any] = field(default_factory=dict)

    def build(self) -> dict[str, Any]:
        """Every field of the table that differs from torch's default, in spec order, then
        the version 2 pt2e keys."""
        for spec in PATTERN_FIELDS:
            value = getattr(self.config, spec.getter)
            if not _is_default(spec.kind, value):
                self._put(spec.key, self._converter(spec.kind), value)
        aten = pattern_aten(self.config)
        if aten:
            self.entry["aten"] = [[ops[0] if len(ops) == 1 else ops for ops in c] for c in aten]
        if pattern_quantize(self.config) is not None:
            self.entry["quantize"] = pattern_quantize(self.config)
        return self.entry

    def _converter(self, kind: FieldKind) -> Callable[[Any], Any]:
        """How a field of ``kind`` is written (it raises ``_Unnameable`` for a nameless object)."""
        if kind is FieldKind.PATTERN:
            return _forward_pattern_doc
        if kind is FieldKind.COMPLEX_PATTERN:
            return _nested_names
        if kind is FieldKind.OBSERVATION_TYPE:
            return observation_type_name
        if kind is FieldKind.DTYPE_CONFIGS:
            return self.table.names_of
        if kind in MODULE_KINDS or kind is FieldKind.FUNCTION:
            return _name
        if kind is FieldKind.FUSER:
            return _fuser_doc
        if kind is FieldKind.OBSERVATION_TYPE_MAP:
            return lambda value: {int(n): observation_type_name(t) for n, t in value.items()}
        if kind is FieldKind.INDEX_MAP:
            return dict
        raise KeyError(f"the exporter does not know field kind {kind}")

    def _put(self, key: str, convert: Callable[[Any], Any], value: Any) -> None:
        try:
            self.entry[key] = convert(value)
        except _Unnameable as exc:
            self._report(
                key,
                codes.UNNAMEABLE,
                f"{qualified_name(exc.args[0])} has no importable name",
                "use a module-level function or class (not a lambda or local function)",
            )
        except ValueError as exc:  # a DTypeConfig the format cannot express
            self._report(key, codes.UNWRITABLE, str(exc))

    def _report(self, key: str, code: str, problem: str, hint: str = "") -> None:
        pattern = self.config._pattern_complex_format or self.config.pattern
        path = ("patterns", self.index, key)
        self.diagnostics.append(
            Diagnostic(
                file=self.source,
                line=0,
                column=0,
                code=code,
                message=(
                    f"cannot export {format_key_path(path)} of pattern "
                    f"{pattern_label(pattern)}: {problem}"
                ),
                hint=hint,
                key_path=path,
            )
        )


def _is_default(kind: FieldKind, value: Any) -> bool:
    """Whether a field still holds torch's default, so the entry leaves it out."""
    if kind is FieldKind.OBSERVATION_TYPE:
        return value == _DEFAULT_OBSERVATION
    return value is None or (isinstance(value, (list, dict)) and not value)


def _forward_pattern_doc(pattern: Any) -> str | list[str]:
    """``pattern`` in forward order: one name, or a list of 2-3 names."""
    if isinstance(pattern, tuple):
        return [_name(op, op_name) for op in pattern]
    return _name(pattern, op_name)


def build_document(backend_config: BackendConfig, source: str = "<export>") -> SpecDocument:
    """The spec document of ``backend_config``; raises ``SpecError`` listing everything a
    spec cannot express: objects without a name, an empty backend name, constraints without
    a dtype (``source`` is the file name the diagnostics report)."""
    table = DTypeConfigTable()
    diagnostics: list[Diagnostic] = []
    if not backend_config.name:  # torch's default; a spec's name is required and non-empty
        diagnostics.append(
            Diagnostic(
                source,
                0,
                0,
                codes.UNWRITABLE,
                "cannot export a BackendConfig without a name: a spec requires one",
                "give it one with BackendConfig('my_backend') or .set_name('my_backend')",
                key_path=("name",),
            )
        )
    doc = SpecDocument(name=backend_config.name)
    for index, config in enumerate(backend_config.configs):
        doc.patterns.append(_EntryBuilder(index, config, table, source, diagnostics).build())
        doc.families.append(family_of(config))
    if diagnostics:
        raise SpecError(diagnostics)
    doc.dtype_configs = table.docs
    return doc
