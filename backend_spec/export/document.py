"""Export stage 3: a BackendConfig as a plain spec document (dicts, lists, str, int, float, bool).

The document is format-neutral: the YAML and TOML emitters only lay it out. Every object is
named here, so every naming failure is found here too, all of them in one pass, and reported
as one :class:`~backend_spec.SpecError` instead of a half-written file. Values torch accepted
but cannot use as given are reported too: a bare DTypeConfig where a list belongs is repaired
with a warning (``notes``), anything else the format cannot hold is an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec import codes
from backend_spec._torch import BackendConfig, BackendPatternConfig, DTypeConfig, ObservationType
from backend_spec.codes import Code
from backend_spec.diagnostics import Diagnostic, Severity, SpecError, format_key_path
from backend_spec.export.dtypes import DTypeConfigTable, DTypeDoc
from backend_spec.export.families import family_of
from backend_spec.export.functions import Unwritable, function_doc
from backend_spec.ir import Entry
from backend_spec.ir.lower import backend_of, entries_of
from backend_spec.names.labels import config_label, qualified_name
from backend_spec.names.naming import object_name, observation_type_name, op_name
from backend_spec.names.resolver import is_module_class
from backend_spec.specfile.fields import MODULE_KINDS, PATTERN_FIELDS, FieldKind

_DEFAULT_OBSERVATION = ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT

#: The name written for a BackendConfig that has none (``BackendConfig()``).
UNNAMED = "unnamed_backend"


@dataclass
class SpecDocument:
    """A spec file's content. ``families`` labels each pattern for the YAML group comments;
    ``notes`` are warnings about the config (what export had to repair)."""

    name: str
    dtype_configs: dict[str, DTypeDoc] = field(default_factory=dict)
    patterns: list[dict[str, Any]] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    extends: str | None = None
    remove: list[Any] = field(default_factory=list)
    spec_version: int = 1
    notes: list[Diagnostic] = field(default_factory=list)
    #: The dtype config name of ``graph_inputs`` (version 5), if graph inputs are observed.
    graph_inputs: str | None = None
    #: ``input_sharing`` (version 5), when not FX's default.
    input_sharing: str | None = None
    #: The ``transform_for_annotation`` passes (version 8), as spec values.
    transform_for_annotation: list[Any] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The document as the loader reads it (key order as written)."""
        out: dict[str, Any] = {"spec_version": self.spec_version, "name": self.name}
        if self.extends is not None:
            out["extends"] = self.extends
        if self.remove:
            out["remove"] = self.remove
        if self.dtype_configs:
            out["dtype_configs"] = self.dtype_configs
        if self.graph_inputs is not None:
            out["graph_inputs"] = self.graph_inputs
        if self.input_sharing is not None:
            out["input_sharing"] = self.input_sharing
        if self.transform_for_annotation:
            out["transform_for_annotation"] = self.transform_for_annotation
        out["patterns"] = self.patterns
        return out


def foreign_packages(doc: SpecDocument) -> list[str]:
    """Top-level packages outside torch and operator that the document names: what a loader
    must put in ``allow_imports``."""
    from backend_spec.names.vocabulary import ALIASES, SPECIAL_NAMES

    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key != "literal":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and "." in node and ":" not in node:
            head = node.split(".")[0]
            if head not in ALIASES and node not in SPECIAL_NAMES:
                found.add(head)

    walk(doc.patterns)
    walk(doc.transform_for_annotation)
    return sorted(found)


def required_version(doc: SpecDocument) -> int:
    """The oldest format version that can say the document: the highest ``x-since`` of the
    keys it uses (the loader's own markers), 2 for a nested forward pattern item, 3 for the
    version 3 ``quantize`` value; else 1."""
    from backend_spec.specfile.fields import OBSERVER_IN_QAT
    from backend_spec.specfile.models import (
        SHAPE_CONDITION,
        SpecModel,
        dynamic_observer,
        dynamic_output,
        field_since,
        keys_since,
        literal_items,
        nested_forward_items,
        own_output,
    )

    since = keys_since()

    def used(node: Any) -> int:
        if isinstance(node, dict):
            versions = [max(since.get(k, 1), used(v)) for k, v in node.items()]
            if node.get("quantize") == "if_all_inputs_quantized":
                versions.append(3)
            if node.get("consumers") == "quantizable":
                versions.append(8)
            if node.get("fake_quant") == OBSERVER_IN_QAT:
                versions.append(10)
            if dynamic_output(node.get("is_dynamic"), node.get("output_dtype")):
                versions.append(8)
            activations = (node.get("input_dtype"), node.get("output_dtype"))
            if dynamic_observer(node.get("is_dynamic"), *activations):
                versions.append(9)
            if own_output(node.get("is_dynamic"), *activations):
                versions.append(9)
            when = node.get("when")
            if isinstance(when, dict) and any(SHAPE_CONDITION in key for key in when):
                versions.append(8)
            if literal_items(node.get("pattern_complex_format")):
                versions.append(3)
            return max(versions, default=1)
        return max((used(v) for v in node), default=1) if isinstance(node, list) else 1

    def dynamic_output_unshared(entry: dict) -> bool:
        """A dynamic config with a quantized output on an entry that observes its output
        otherwise than with the input's observer: version 9 observes that output too."""
        if entry.get("observation_type") == "output_share_observer_with_input":
            return False
        configs = [
            doc.dtype_configs.get(ref) if isinstance(ref, str) else ref
            for ref in entry.get("dtype_configs") or ()
        ]
        return any(
            isinstance(c, dict) and dynamic_output(c.get("is_dynamic"), c.get("output_dtype"))
            for c in configs
        )

    unshared = 9 if any(dynamic_output_unshared(entry) for entry in doc.patterns) else 1
    nested = any(nested_forward_items(entry.get("pattern")) for entry in doc.patterns)
    backend_keys = max(
        (
            field_since(SpecModel, key)
            for key in ("graph_inputs", "input_sharing", "transform_for_annotation")
            if getattr(doc, key) not in (None, [])
        ),
        default=1,
    )
    return max(
        2 if nested else 1, backend_keys, unshared, used(doc.patterns), used(doc.dtype_configs)
    )


def pass_doc(function: Any) -> Any:
    """A ``transform_for_annotation`` pass as a spec writes it (a name or a factory call);
    ValueError when it has neither."""
    from backend_spec.export.functions import Unwritable, function_doc

    try:
        return function_doc(function)
    except Unwritable as exc:
        raise ValueError(f"transform_for_annotation: {exc.problem}") from None


def _safe_label(config: Any) -> str:
    try:
        return config_label(config)
    except Exception:  # the label itself fails on this config
        return "?"


def _name(obj: Any, namer: Callable[[Any], str | None] = object_name) -> str:
    name = namer(obj)
    if name is None:
        raise Unwritable(obj, f"{qualified_name(obj)} has no importable name")
    return name


def _observation_type(value: Any) -> str:
    if not isinstance(value, ObservationType):
        raise Unwritable(
            value,
            f"{value!r} is not an ObservationType; torch fails on it in prepare_fx",
            codes.UNWRITABLE,
            "set an ObservationType member",
        )
    return observation_type_name(value)


def _observation_types(mapping: Any) -> dict[int, str]:
    if not isinstance(mapping, dict) or not all(
        isinstance(n, int) and isinstance(t, ObservationType) for n, t in mapping.items()
    ):
        raise Unwritable(
            mapping,
            f"{mapping!r} is not a mapping of ints to ObservationTypes",
            codes.UNWRITABLE,
            "map argument counts to ObservationType members",
        )
    return {int(n): observation_type_name(t) for n, t in mapping.items()}


def _input_indices(mapping: Any) -> dict[str, int]:
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in mapping.items()
    ):
        raise Unwritable(
            mapping,
            f"{mapping!r} is not a mapping of input names to argument indices",
            codes.UNWRITABLE,
            "write it like {'weight': 1, 'bias': 2}",
        )
    return dict(mapping)


def _module_name(obj: Any) -> str:
    """A module-class field's name; anything else would be refused by the loader."""
    if not is_module_class(obj):
        raise Unwritable(
            obj,
            f"{qualified_name(obj)} is not an nn.Module subclass; torch keeps it, then fails "
            "when it builds modules for this pattern",
            codes.UNWRITABLE,
            "set a module class (nn.Conv2d, not nn.Conv2d(...) or a function)",
        )
    return _name(obj)


def _nested_names(pattern: Any) -> Any:
    """Names of a pattern in torch's nested tuple format, as nested lists."""
    if isinstance(pattern, tuple):
        return [_nested_names(p) for p in pattern]
    if isinstance(pattern, int) and not isinstance(pattern, bool):
        return pattern  # an argument literal (version 3)
    return _name(pattern, op_name)


def _forward_pattern_doc(pattern: Any) -> str | list[Any]:
    """``pattern`` in forward order: one name, or a list of 2-3 items, each a name or (for
    configs that nest a tuple inside a forward pattern) a nested list kept as torch keeps it."""
    if isinstance(pattern, tuple):
        return [_nested_names(op) for op in pattern]
    return _name(pattern, op_name)


@dataclass
class _EntryBuilder:
    """Builds the entry of one pattern; a value it cannot write becomes a diagnostic."""

    index: int
    config: BackendPatternConfig
    table: DTypeConfigTable
    source: str
    diagnostics: list[Diagnostic]
    entry: dict[str, Any] = field(default_factory=dict)
    #: The config's intermediate form (its version 2 facts; set by :meth:`build`).
    facts: Entry | None = None

    def build(self, entry_of: Callable[[BackendPatternConfig], Entry]) -> dict[str, Any]:
        """Every field of the table that differs from torch's default, in spec order, then
        the version 2 pt2e keys (``entry_of`` gives the config's intermediate form)."""
        self.facts = entry_of(self.config)
        for spec in PATTERN_FIELDS:
            value = getattr(self.config, spec.getter)
            if not _is_default(spec.kind, value):
                self._put(spec.key, self._converter(spec.kind), value)
        pt2e = self.facts.pt2e_options()
        self.entry.update((key, value) for key, value in pt2e.items() if value is not None)
        return self.entry

    def _converter(self, kind: FieldKind) -> Callable[[Any], Any]:
        """How a field of ``kind`` is written (it raises ``Unwritable`` for what it cannot)."""
        if kind is FieldKind.PATTERN:
            return _forward_pattern_doc
        if kind is FieldKind.COMPLEX_PATTERN:
            return _nested_names
        if kind is FieldKind.OBSERVATION_TYPE:
            return _observation_type
        if kind is FieldKind.DTYPE_CONFIGS:
            return lambda value: self._dtype_config_names(value)
        if kind in MODULE_KINDS:
            return _module_name
        if kind in (FieldKind.FUNCTION, FieldKind.FUSER):
            return function_doc
        if kind is FieldKind.OBSERVATION_TYPE_MAP:
            return _observation_types
        if kind is FieldKind.INDEX_MAP:
            return _input_indices
        raise KeyError(f"the exporter does not know field kind {kind}")

    def _dtype_config_names(self, value: Any) -> list[str]:
        """The hoisted names of the pattern's DTypeConfigs, each read from the intermediate
        form (its version 2 observer options included): one per torch DTypeConfig."""
        self._dtype_configs(value)  # reports what torch was given instead of a list
        assert self.facts is not None
        return self.table.names_of(self.facts.dtype_configs)

    def _dtype_configs(self, value: Any) -> list[DTypeConfig]:
        """The pattern's DTypeConfigs as a list; what torch was given instead is reported."""
        if isinstance(value, DTypeConfig):
            self._report(
                "dtype_configs",
                codes.MALFORMED_CONFIG,
                "a bare DTypeConfig where a list belongs; torch stores it, then prepare_fx "
                "fails with \"TypeError: 'DTypeConfig' object is not iterable\" on any model "
                "with this pattern. Exported as a one-item list",
                "pass [dtype_config] to set_dtype_configs",
            )
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, DTypeConfig) for v in value):
            return list(value)
        if isinstance(value, (list, tuple)):
            bad = next(v for v in value if not isinstance(v, DTypeConfig))
            problem = f"an item is a {type(bad).__name__}, not a DTypeConfig"
        else:
            problem = f"it is a {type(value).__name__}, not a list of DTypeConfigs"
        raise Unwritable(
            value,
            f"{problem}; torch stores it, then prepare_fx fails on any model with this pattern",
            codes.UNWRITABLE,
            "pass a list of DTypeConfig objects to set_dtype_configs",
        )

    def _put(self, key: str, convert: Callable[[Any], Any], value: Any) -> None:
        try:
            self.entry[key] = convert(value)
        except Unwritable as exc:
            self._report(key, exc.code, exc.problem, exc.hint)
        except ValueError as exc:  # a DTypeConfig the format cannot express
            self._report(key, codes.UNWRITABLE, str(exc))

    def report_internal(self, exc: Exception) -> None:
        """An unforeseen failure on this pattern, as a diagnostic naming the pattern."""
        self.diagnostics.append(
            Diagnostic(
                file=self.source,
                line=0,
                column=0,
                code=codes.INTERNAL,
                message=f"cannot export patterns[{self.index}] of pattern "
                f"{_safe_label(self.config)}: {type(exc).__name__}: {exc}",
                hint="please report this with the config that caused it",
                key_path=("patterns", self.index),
            )
        )

    def _report(
        self,
        key: str,
        code: Code,
        problem: str,
        hint: str | None = None,
    ) -> None:
        """A problem of this entry's field ``key``, as severe as its code says (an error
        says the field cannot be exported; a warning that it was, as shown)."""
        path = ("patterns", self.index, key)
        where = f"{format_key_path(path)} of pattern {_safe_label(self.config)}"
        error = code.severity is Severity.ERROR
        message = f"cannot export {where}: {problem}" if error else f"{where}: {problem}"
        self.diagnostics.append(Diagnostic(self.source, 0, 0, code, message, hint, key_path=path))


def _is_default(kind: FieldKind, value: Any) -> bool:
    """Whether a field still holds torch's default, so the entry leaves it out."""
    if kind is FieldKind.OBSERVATION_TYPE:
        return value == _DEFAULT_OBSERVATION
    return value is None or (isinstance(value, (list, dict)) and not value)


def build_document(
    backend_config: BackendConfig,
    source: str | None = None,
    *,
    name: str | None = None,
    base: str | None = None,
    spec_names: bool = False,
) -> SpecDocument:
    """The spec document of ``backend_config``; raises ``SpecError`` listing everything a
    spec cannot express (objects without a name, constraints without a dtype, malformed
    values). ``name`` overrides the config's name (when it has none and no ``name`` is given,
    :data:`UNNAMED` is written with a note); ``base`` writes ``extends: base`` plus only what
    differs from it. ``source`` is what diagnostics show as the place (default ``<name>``).
    With ``spec_names`` dtype configs keep the names a spec gave them (see
    :class:`~backend_spec.export.dtypes.DTypeConfigTable`)."""
    from backend_spec.export.extends import rebase

    name = name or backend_config.name
    source = source or f"<{name or UNNAMED}>"
    notes: list[Diagnostic] = []
    if not name:
        name = UNNAMED
        notes.append(
            Diagnostic(
                source,
                0,
                0,
                codes.UNWRITABLE,
                f"the BackendConfig has no name; writing name: {UNNAMED}",
                "pass a name (bespec export --name NAME) or set one with .set_name()",
                severity=Severity.WARNING,
                key_path=("name",),
            )
        )
    plan = rebase(backend_config, base) if base is not None else None
    table = DTypeConfigTable(spec_names=spec_names)
    diagnostics: list[Diagnostic] = []
    doc = SpecDocument(name=name, notes=notes)
    indexed = plan.entries if plan is not None else list(enumerate(backend_config.configs))
    entry_of = entries_of(backend_config)
    for index, config in indexed:
        builder = _EntryBuilder(index, config, table, source, diagnostics)
        try:
            doc.patterns.append(builder.build(entry_of))
            doc.families.append(family_of(config))
        except Exception as exc:  # a value no check foresaw: reported, never a traceback
            builder.report_internal(exc)
    if plan is not None:
        doc.extends, doc.remove = base, [_forward_pattern_doc(p) for p in plan.remove]
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]
    if errors:
        raise SpecError(errors)
    doc.notes += diagnostics
    backend = backend_of(backend_config)
    if backend.input_sharing not in (None, "dtype"):
        doc.input_sharing = backend.input_sharing
    inputs = backend.graph_inputs
    if inputs is not None:
        doc.graph_inputs = table.name_of(inputs)
    doc.transform_for_annotation = [
        pass_doc(ref.function) for ref in backend.transform_for_annotation
    ]
    doc.dtype_configs = table.docs
    doc.spec_version = required_version(doc)
    return doc
