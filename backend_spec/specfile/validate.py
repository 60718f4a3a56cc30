"""Stage 2 runner: plain data -> :class:`SpecModel`, or diagnostics at the right line and column.

pydantic reports errors by location tuple; this module maps each to the source position kept
by :mod:`backend_spec.specfile.source`, gives it a stable code, and adds a "did you mean" hint.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from backend_spec import codes
from backend_spec.diagnostics import (
    MAX_DIAGNOSTICS,
    Diagnostic,
    capped,
    close_matches,
    format_key_path,
)
from backend_spec.specfile.fields import MODULE_KINDS, FieldKind, fields_of
from backend_spec.specfile.models import (
    INPUT_TYPES,
    DTypeConfigModel,
    DTypeWithConstraintsModel,
    FunctionForm,
    PatternModel,
    SpecModel,
    version_uses,
)
from backend_spec.specfile.source import KeyPath, SourceDoc

_DTYPE_KEYS = ("input_dtype", "output_dtype", "weight_dtype", "bias_dtype")
_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "int_parsing": "an integer",
    "union_tag_invalid": "a supported value",
    "union_tag_not_found": "a supported value",
}


def validate(doc: SourceDoc) -> tuple[SpecModel | None, list[Diagnostic]]:
    """Validate parsed data with error recovery; ``x-`` top-level keys are set aside first.

    Each pattern entry and each named dtype config is validated on its own. A bad value is
    reported and set aside: the entry is kept without it when it still means something (a
    pattern with a bad observation type), else the whole entry goes. The rest is returned,
    entries with their indices in the file, so resolution and the semantic rules still see
    everything that is right. The model is None only when the document is not a mapping.
    """
    data = doc.data
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}"
        return None, [
            doc.diagnostic(
                (),
                codes.NOT_A_MAPPING,
                f"a spec must be a mapping, this one is {what}",
                "start with 'name: my_backend'",
            )
        ]
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
    problems = [
        doc.diagnostic((k,), codes.UNKNOWN_KEY, f"unknown key {k!r}", at_key=True)
        for k in data
        if not isinstance(k, str)
    ]
    data = {k: v for k, v in data.items() if isinstance(k, str)}
    try:
        known, dropped = _without_unknown_keys(data, ())
        problems += [_unknown_key(doc, data, path) for path in dropped[: MAX_DIAGNOSTICS + 1]]
        spec, found, unlisted = _recover(doc, known)
        unlisted += max(0, len(dropped) - MAX_DIAGNOSTICS - 1)
    except RecursionError:
        return None, [*problems, doc.diagnostic((), codes.TOO_DEEP, "nesting too deep")]
    if spec is not None:
        found += _version_problems(doc, spec)
    found = _dedented(doc, data, spec, _dedupe([*problems, *found]))
    return spec, capped(found, unlisted)


def _dedented(
    doc: SourceDoc, data: dict[str, Any], spec: SpecModel | None, found: list[Diagnostic]
) -> list[Diagnostic]:
    """The indentation mistake: a key left empty where a mapping belongs (``act_only:``),
    followed at its own level by keys of that mapping (``input_dtype: ...``). The empty key
    is the cause: its hint names the keys to indent, and the errors of those keys say they
    belong under it; they are set aside, so no later check reports them as entries of their
    own (an unused dtype config named ``input_dtype``)."""
    out: list[Diagnostic | None] = list(found)
    orders: dict[KeyPath, tuple[list[Any], dict[Any, int]]] = {}
    for i, d in enumerate(found):
        path = d.key_path
        if d.code != codes.WRONG_TYPE or not path or _value_at(data, path) is not None:
            continue
        model, parent = model_at(path), _value_at(data, path[:-1])
        if model is model_at(path[:-1]) or not isinstance(parent, dict):
            continue  # not an empty mapping
        if path[:-1] not in orders:  # once per mapping: a flood of empty keys stays linear
            orders[path[:-1]] = (list(parent), {k: n for n, k in enumerate(parent)})
        keys, index = orders[path[:-1]]
        own = []
        for n in range(index[path[-1]] + 1, len(keys)):  # the keys after it, no copy
            if keys[n] not in model.model_fields:
                break
            own.append(keys[n])
        if not own:
            continue
        name, line = path[-1], doc.key_where(path)[0]
        out[i] = replace(
            d,
            hint=f"nothing is written under {name}, and the keys after it ({', '.join(own)}) "
            f"are its keys: indent them under {name}",
        )
        moved = {(*path[:-1], key) for key in own}
        level = format_key_path(path[:-1]) or "the spec"
        said: set[KeyPath] = set()
        for j, other in enumerate(out):
            key_path = other.key_path[: len(path)]
            if key_path not in moved:
                continue
            if key_path in said:  # one finding per dedented key: its errors are one mistake
                out[j] = None
                continue
            said.add(key_path)
            out[j] = replace(
                doc.diagnostic(key_path, other.code, "", at_key=True),
                message=f"{key_path[-1]} is read as an entry of {level}, not as a key of {name}",
                hint=f"indent it under {name} (line {line})",
            )
        if spec is not None:
            spec._set_aside = spec._set_aside | moved
    return [d for d in out if d is not None]


#: Keys whose mapping value is a function form (a fuser or getter, or a wrapped one).
_FORM_KEYS = frozenset(
    ("fuser_method", "root_node_getter", "extra_inputs_getter", "reverse2", "reverse3")
)


#: Keys of an entry whose mapping values have a model of their own (model_at knows which).
_MODEL_KEYS = frozenset((*_DTYPE_KEYS, *_FORM_KEYS))


def _without_unknown_keys(value: dict[str, Any], path: KeyPath) -> tuple[dict[str, Any], list]:
    """A copy of ``value`` (the mapping at ``path``) without the keys its model does not
    know, down through its entries and their dtype and fuser mappings, and their paths.

    Found here, before pydantic runs: pydantic builds one error per unknown key, and a flood
    of them (a quarter of a million in an 8 MB file) costs hundreds of megabytes before any
    cap applies. This costs a set lookup per key."""
    allowed = model_at(path).model_fields
    dropped: list[KeyPath] = []
    kept: dict[str, Any] = {}
    for key, child in value.items():
        if isinstance(key, str) and key not in allowed:
            dropped.append((*path, key))
            continue
        if key in _MODEL_KEYS and isinstance(child, dict):
            child, more = _without_unknown_keys(child, (*path, key))
            dropped += more
        elif key in ("patterns", "dtype_configs") and isinstance(child, (list, dict)):
            child = _entries_without_unknown_keys(child, (*path, key), dropped)
        kept[key] = child
    return kept, dropped


def _entries_without_unknown_keys(entries: list | dict, path: KeyPath, dropped: list) -> Any:
    """A copy of a list or mapping of entries (patterns, dtype configs), each without its
    unknown keys (their paths added to ``dropped``)."""
    items = enumerate(entries) if isinstance(entries, list) else entries.items()
    kept = {}
    for key, entry in items:
        if isinstance(entry, dict):
            entry, more = _without_unknown_keys(entry, (*path, key))
            dropped += more
        kept[key] = entry
    return list(kept.values()) if isinstance(entries, list) else kept


def _unknown_key_here(doc: SourceDoc, data: Any, written: KeyPath, path: KeyPath) -> Diagnostic:
    """An unknown key: at the key, with the closest allowed key as a hint (never the key
    itself). A key reached through an alias whose mapping is written for another place (no
    key of it is allowed where the alias puts it: ``input_dtype: *act`` dedented to a dtype
    config's level) is the alias's mistake, not the anchor's: reported once, where the alias
    is used."""
    key = str(path[-1])
    allowed = [k for k in model_at(written[:-1]).model_fields if k != key]
    used_at = written[:-1]
    if path != written and doc.canonical(used_at) != used_at:
        mapping = _value_at(data, used_at)
        keys = [str(k) for k in mapping] if isinstance(mapping, dict) else [key]
        if not set(keys) & set(allowed):
            anchor_line = doc.where(used_at)[0]
            return doc.diagnostic(
                used_at,
                codes.UNKNOWN_KEY,
                f"{format_key_path(used_at)} is an alias of the mapping at line {anchor_line}, "
                f"whose keys ({', '.join(keys)}) do not belong here",
                "check the indentation of this line: is it meant one level deeper? Allowed "
                "keys here: " + ", ".join(allowed),
                at_key=True,
            )
    match = close_matches(key, allowed, n=1, cutoff=0.5)
    hint = f"did you mean '{match[0]}'?" if match else "allowed keys: " + ", ".join(allowed)
    return doc.diagnostic(path, codes.UNKNOWN_KEY, f"unknown key '{key}'", hint, at_key=True)


def _unknown_key(doc: SourceDoc, data: Any, path: KeyPath) -> Diagnostic:
    """The diagnostic pydantic's ``extra_forbidden`` error at ``path`` would give."""
    return _diagnostic(doc, data, {"type": "extra_forbidden", "loc": path, "msg": ""})


def _version_problems(doc: SourceDoc, spec: SpecModel) -> list[Diagnostic]:
    """Keys and values of a newer format version than the file says (or defaults to); none
    when the version it says is refused (the default it falls back to is not what it says)."""
    if spec.set_aside(("spec_version",)):
        return []
    return [
        doc.diagnostic(
            path,
            codes.VERSION_2_KEY,
            f"{format_key_path(path)} needs format version {version}; "
            f"this file is spec_version {spec.spec_version}",
            f"set spec_version: {version}",
        )
        for path, version in version_uses(spec)
        if version > spec.spec_version
    ]


def _recover(
    doc: SourceDoc, data: dict[str, Any]
) -> tuple[SpecModel | None, list[Diagnostic], int]:
    """The spec validated entry by entry, its problems (at most MAX_DIAGNOSTICS built), and
    how many more were found but not built: 400,000 bad entries must not cost a gigabyte."""
    problems: list[Diagnostic] = []
    set_aside: set[KeyPath] = set()
    unlisted = 0

    def check(model: type[BaseModel], value: Any, prefix: KeyPath) -> Any:
        nonlocal unlisted
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        for err in errors:
            if len(problems) > MAX_DIAGNOSTICS:
                unlisted += 1
                continue
            problems.append(_diagnostic(doc, data, {**err, "loc": (*prefix, *err["loc"])}))
        kept = _without_bad_fields(model, value, errors)
        if kept is None:
            set_aside.add(prefix)
            return None
        set_aside.update((*prefix, str(err["loc"][0])) for err in errors)
        return kept

    top = dict(data)
    raw_patterns, raw_configs = data.get("patterns"), data.get("dtype_configs")
    patterns: list[PatternModel] = []
    indices: list[int] = []
    if isinstance(raw_patterns, list):
        del top["patterns"]
        for index, item in enumerate(raw_patterns):
            entry = check(PatternModel, item, ("patterns", index))
            if entry is not None:
                patterns.append(entry)
                indices.append(index)
    configs: dict[str, DTypeConfigModel] = {}
    if isinstance(raw_configs, dict):
        del top["dtype_configs"]
        for name, item in raw_configs.items():
            config = check(DTypeConfigModel, item, ("dtype_configs", name))
            if config is not None and isinstance(name, str):
                configs[name] = config
            elif not isinstance(name, str):
                problems.append(_key_type(doc, ("dtype_configs", name)))
    spec = _top_level(doc, data, top, problems, set_aside)
    if spec is None:
        return None, problems, unlisted
    spec = spec.model_copy(update={"patterns": patterns, "dtype_configs": configs})
    spec._pattern_indices = tuple(indices)
    spec._set_aside = frozenset(set_aside)
    return spec, problems, unlisted


#: Fields without which an entry means nothing: when one of them is bad, the entry goes.
_ESSENTIAL = frozenset({"pattern", "pattern_complex_format", "dtype", "sequential"})


def _without_bad_fields(model: type[BaseModel], value: Any, errors: list[Any]) -> Any:
    """The entry validated without the fields that failed (None when it cannot be): an entry
    with one bad value is still a pattern the duplicate and fusion rules must see."""
    if not isinstance(value, dict) or any(not err["loc"] for err in errors):
        return None  # not a mapping, or a whole-entry problem (such as both pattern forms)
    bad_items: dict[str, set[int]] = {}
    for err in errors:
        loc = err["loc"]
        items = value.get(loc[0])
        whole = len(loc) < 2 or not isinstance(items, list) or not isinstance(loc[1], int)
        bad_items.setdefault(loc[0], set()).add(-1 if whole else loc[1])
    if set(bad_items) & _ESSENTIAL:
        return None
    kept = {}
    for key, item in value.items():
        if key not in bad_items:
            kept[key] = item
        elif -1 not in bad_items[key]:  # a list field: keep its good items (dtype_configs)
            kept[key] = [x for i, x in enumerate(item) if i not in bad_items[key]]
    try:
        return model.model_validate(kept)
    except ValidationError:
        return None


def _top_level(
    doc: SourceDoc,
    data: dict[str, Any],
    top: dict[str, Any],
    problems: list[Diagnostic],
    set_aside: set[KeyPath],
) -> SpecModel | None:
    """The top-level keys; a bad one is reported and left out (a missing or bad ``name``
    becomes a placeholder: the file fails anyway, but its other problems still surface)."""
    try:
        return SpecModel.model_validate(top)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    room = max(0, MAX_DIAGNOSTICS + 1 - len(problems))  # SpecError counts the rest
    problems.extend(_diagnostic(doc, data, err) for err in errors[:room])
    bad = {str(err["loc"][0]) for err in errors if err["loc"]}
    set_aside.update((key,) for key in bad)
    kept = {k: v for k, v in top.items() if k not in bad}
    kept.setdefault("name", "<invalid>")
    try:
        return SpecModel.model_validate(kept)
    except ValidationError:  # pragma: no cover - every bad key was removed above
        return None


def _offending_line(doc: SourceDoc, path: KeyPath, ctx: dict[str, Any]) -> KeyPath:
    """A check of a whole dtype mapping that names its offending field (``label``) points at
    that field when it has a line of its own (block style); in a one-line flow mapping the
    mapping itself is the place, as before."""
    label = ctx.get("label")
    if not isinstance(label, str):
        return path
    field = doc.canonical((*path, label))
    own = doc.positions.get(field)
    return field if own is not None and own[0] != doc.where(path)[0] else path


def _key_type(doc: SourceDoc, path: KeyPath) -> Diagnostic:
    return doc.diagnostic(
        path,
        codes.WRONG_TYPE,
        f"{format_key_path(path[:-1])} keys must be names, got {_show(path[-1])}",
        at_key=True,
    )


def _dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per place and code: a union's branches and an anchor's uses each fail
    the same way, and the first message is the one worth showing."""
    seen: set[tuple[int, int, str, str]] = set()
    out = []
    for d in diagnostics:
        key = (d.line, d.column, d.code, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def data_path(data: Any, loc: tuple[Any, ...], missing: bool = False) -> KeyPath:
    """The key path of the data an error location points at: real keys and indices only.

    pydantic puts union branch names (``name``, ``constrained``, ``int``...) and ``[key]`` in
    locations; those are dropped, and so is anything past a scalar (a branch of its type).
    """
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict):
            if str(part) in node and part not in node:
                part = str(part)  # TOML table keys are strings where the model wants ints
            if part in node:
                node = node[part]
            elif part in _TAGS and (i < len(loc) - 1 or not missing):
                continue  # a union tag, not a key of the data (unless a key is missing)
            else:
                node = None
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(node, list) and part in _TAGS:
            continue
        else:
            break  # a scalar: what follows names a branch of its type
        path.append(part)
    return tuple(path)


_TAGS = {
    "name",
    "constrained",
    "inline",
    "sequential",
    "sequence",
    "form",
    "literal",
    "tuple",
    "bool",
    "int",
    "float",
    "[key]",
}


def _value_at(data: Any, path: KeyPath) -> Any:
    node = data
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def model_at(path: KeyPath) -> type[BaseModel]:
    """The model that validates the mapping at ``path`` (for listing its allowed keys).

    Walked from the root, so a name is never taken for a key: a dtype config named
    ``input_dtype`` is a dtype config, not the dtype mapping of one."""
    model: type[BaseModel] = SpecModel
    i = 0
    while i < len(path):
        part = path[i]
        if model is SpecModel and part in ("patterns", "dtype_configs") and i + 1 < len(path):
            model = PatternModel if part == "patterns" else DTypeConfigModel
            i += 2
            continue
        if model is PatternModel and part == "dtype_configs" and i + 1 < len(path):
            model, i = DTypeConfigModel, i + 2  # an inline dtype config
            continue
        if model is DTypeConfigModel and part in _DTYPE_KEYS:
            model = DTypeWithConstraintsModel
        elif model in (PatternModel, FunctionForm) and part in _FORM_KEYS:
            model = FunctionForm
        else:
            return model  # inside a value that has no model of its own
        i += 1
    return model


def _diagnostic(doc: SourceDoc, data: Any, err: Any) -> Diagnostic:
    kind = err["type"]
    loc = err["loc"]
    written = data_path(data, loc, missing=kind == "missing")
    value = _value_at(data, written)
    path = doc.canonical(written)  # a mistake inside an anchor is reported at the anchor
    where = format_key_path(path) or "the spec"
    ctx = err.get("ctx") or {}
    on_key = bool(loc) and loc[-1] == "[key]"
    if kind == "extra_forbidden":
        return _unknown_key_here(doc, data, written, path)
    if kind == "missing":
        return doc.diagnostic(
            path[:-1],
            codes.MISSING_KEY,
            f"missing required key '{path[-1]}'",
            at_key=True,
        )
    if kind.startswith("BS"):
        path = _offending_line(doc, path, ctx)
        return doc.diagnostic(path, kind, err["msg"], _custom_hint(kind, ctx), at_key=on_key)
    if kind == "literal_error" and path == ("spec_version",):
        return doc.diagnostic(
            path,
            codes.SPEC_VERSION,
            f"unsupported spec_version {value!r}",
            f"this bespec reads versions {_versions()}",
        )
    if kind in ("too_short", "too_long") and not _is_pattern(path):
        bound = (
            f"at most {ctx.get('max_length')}"
            if kind == "too_long"
            else f"at least {ctx.get('min_length')}"
        )
        return doc.diagnostic(
            path,
            codes.PATTERN_LENGTH if "aten" in path else codes.INVALID_VALUE,
            f"{where} has {_items(len(value) if isinstance(value, (list, dict)) else '?')}; "
            f"it takes {bound}",
            _ATEN_HINT if "aten" in path else _LENGTH_HINTS.get(_last_key(path), ""),
        )
    if kind in ("too_short", "too_long"):
        return doc.diagnostic(
            path,
            codes.PATTERN_LENGTH,
            f"{where} has {_items(ctx.get('actual_length'))}; a pattern list has 2 or 3 ops",
        )
    if on_key:
        shown = _show(path[-1])
        field = format_key_path(path[:-1])
        return doc.diagnostic(
            path,
            codes.WRONG_TYPE,
            f"{field} keys must be {_key_expected(path)}, got {shown}",
            "name an argument of the ops' ATen schema, such as min_val" if "when" in path else "",
            at_key=True,
        )
    if kind in _TYPE_NAMES or kind.startswith("union_tag"):
        expected = _expected(path) or _TYPE_NAMES.get(kind, "a supported value")
        return doc.diagnostic(
            path,
            codes.WRONG_TYPE,
            f"{where} must be {expected}, got {_show(value)}",
            _type_hint(path, value),
        )
    if kind == "greater_than_equal":
        return doc.diagnostic(path, codes.INVALID_VALUE, f"{where} must be >= {ctx.get('ge')}")
    if kind == "less_than_equal":  # pydantic's own text ("Input should be ...") names no field
        return doc.diagnostic(path, codes.INVALID_VALUE, f"{where} must be <= {ctx.get('le')}")
    if kind == "string_too_short":
        return doc.diagnostic(path, codes.INVALID_VALUE, f"{where} must not be empty")
    if kind == "literal_error":  # a closed vocabulary of version 2 (quantize, observer...)
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        match = close_matches(str(value).lower(), choices, n=1)
        return doc.diagnostic(
            path,
            codes.INVALID_VALUE,
            f"{where} must be one of {', '.join(choices)}, got {_show(value)}",
            f"did you mean '{match[0]}'?" if match else "write one of " + ", ".join(choices),
        )
    if kind == "string_pattern_mismatch" and "aten" in path:
        return doc.diagnostic(
            path,
            codes.INVALID_VALUE,
            f"{where}: {_show(value)} is not an ATen overload name",
            _ATEN_HINT,
        )
    if kind == "string_too_long":
        return doc.diagnostic(
            path, codes.INVALID_VALUE, f"{where} is longer than {ctx.get('max_length')} characters"
        )
    return doc.diagnostic(path, codes.INVALID_VALUE, f"{where}: {err['msg']}")


def _versions() -> str:
    """The format versions this bespec reads, as a phrase ("1, 2, 3, 4 and 5")."""
    known = [str(v) for v in get_args(SpecModel.model_fields["spec_version"].annotation)]
    return ", ".join(known[:-1]) + " and " + known[-1]


#: Hints for a list or mapping of the wrong length, by key.
_LENGTH_HINTS = {
    "args": "a factory takes a few arguments: name the fused class or fuser it wraps",
    "kwargs": "a factory takes a few keyword arguments",
    "dtype_configs": "define the dtype configs once under the top-level dtype_configs",
}


def _last_key(path: KeyPath) -> str:
    return next((p for p in reversed(path) if isinstance(p, str)), "")


_ATEN_HINT = "write aten.<op>.<overload>, e.g. aten.relu.default (torch.ops.aten names)"


def _items(count: Any) -> str:
    return f"{count} item{'' if count == 1 else 's'}"


_MODULE_KEYS = frozenset(f.key for f in fields_of(*MODULE_KINDS))
_FUNCTION_KEYS = frozenset(f.key for f in fields_of(FieldKind.FUNCTION))

_PATTERN = "an op name, or a list of 2\N{EN DASH}3 op names"


def _is_pattern(path: KeyPath) -> bool:
    """``pattern``, an item of ``remove``, or one op inside either."""
    strings = [p for p in path if isinstance(p, str)]
    return bool(strings) and strings[-1] in ("pattern", "remove", "pattern_complex_format")


def _expected(path: KeyPath) -> str:
    """What a value at ``path`` must be, in the user's words ("" when the type says it)."""
    if not path:
        return ""
    last = path[-1]
    if len(path) == 2 and path[0] == "dtype_configs":  # whatever its name
        return "a mapping (a dtype config such as {input_dtype: quint8})"
    if last == "pattern" or (len(path) == 2 and path[0] == "remove"):
        return _PATTERN
    if last in _DTYPE_KEYS:
        return "a dtype name such as quint8, or a mapping {dtype: quint8, ...}"
    if last == "fuser_method":
        return (
            "a function name, {sequential: FusedModuleClass}, or (spec_version 2) "
            "{call: factory, args: [...]}"
        )
    if last in _MODULE_KEYS:
        return "a module class name such as nn.Conv2d"
    if last in _FUNCTION_KEYS:
        return "a function name, or (spec_version 2) {call: factory, args: [...]}"
    if last == "dtype_configs" and len(path) == 3:
        return "a list of dtype config names or inline dtype configs"
    if isinstance(last, int) and path[:1] == ("patterns",) and len(path) == 2:
        return "a mapping such as {pattern: nn.ReLU, ...}"
    if isinstance(last, int) and len(path) >= 3 and path[-2] == "dtype_configs":
        return "the name of a dtype config, or an inline dtype config mapping"
    if isinstance(last, int) and _is_pattern(path):
        return "an op name"
    if "aten" in path:
        return _ATEN_EXPECTED[min(len(path) - path.index("aten"), 3) - 1]
    if len(path) == 4 and path[-2] == "when":
        return "a number, true, false or a string (the argument's value, e.g. min_val: 0.0)"
    if last in ("sequential", "reverse_sequential"):
        return "a fused module class name such as nni.ConvReLU2d"
    if last == "call":
        return "the name of a factory function"
    if isinstance(last, int) and ("args" in path or "kwargs" in path[-2:-1]):
        return "a name, a number, true/false, {literal: text}, a list, or a function form"
    return ""


#: What ``aten``, one chain of it, and one op of a chain must be.
_ATEN_EXPECTED = (
    "a list of ATen chains, e.g. [[aten.conv2d.default, aten.relu.default]]",
    "a chain: a list of ATen overload names, e.g. [aten.conv2d.default, aten.relu.default]",
    "an ATen overload name such as aten.relu.default, or a list of alternatives",
)


def _key_expected(path: KeyPath) -> str:
    if "num_tensor_args_to_observation_type" in path:
        return "numbers of tensor arguments (0, 1, 2...)"
    if "input_type_to_index" in path:
        return "input types (" + ", ".join(INPUT_TYPES) + ")"
    if "when" in path:
        return "ATen argument names"
    return "names"


def _show(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_hint(path: KeyPath, value: Any) -> str:
    if _is_pattern(path):
        return "write ops in forward order, e.g. [nn.Conv2d, nn.ReLU]"
    if path[-1:] == ("dtype_configs",) and isinstance(value, str):
        return f"write [{value}]"
    if "aten" in path:
        return _ATEN_HINT
    if len(path) == 4 and path[-2] == "when":
        return "one value per argument, e.g. when: {min_val: 0.0}"
    last = path[-1] if path else None
    if value is None and model_at(path) is not model_at(path[:-1]):  # a mapping left empty
        return (
            f"nothing is written under {last}: indent the keys that belong to it one level "
            "deeper than it"
        )
    if isinstance(last, int) and ("args" in path or "kwargs" in path[-2:-1]):
        return "e.g. args: [nni.ConvReLU2d, 1, {literal: relu}]"
    return _TYPE_HINTS.get(last, "") if isinstance(last, str) else ""


#: Hints for a value of the wrong type, by key (version 2 keys and the fuser forms).
_TYPE_HINTS = {
    "ch_axis": "the channel axis of per_channel weights: an integer, usually 0",
    "annotation_stage": "the annotation pass, a whole number from 0, e.g. annotation_stage: 1",
    "claim_stage": "the claim pass, a whole number from 0, e.g. claim_stage: 1",
    "reduce_range": "write true or false",
    "is_dynamic": "write true or false",
    "args": "write a list, e.g. args: [nni.ConvReLU2d]",
    "kwargs": "write a mapping, e.g. kwargs: {index: 1}",
    "call": "name a factory function, e.g. torch.ao.quantization.fuser_method_mappings._reverse2",
    "sequential": "name a fused module class, e.g. nni.ConvReLU2d",
    "reverse_sequential": "name a fused module class, e.g. nni.ConvReLU2d",
    "literal": "write the text as a string, e.g. {literal: 'relu'}",
}


def _custom_hint(code: str, ctx: dict[str, Any]) -> str | None:
    if ctx.get("hint"):  # a model validator that knows the fix says it
        return str(ctx["hint"])
    if code == codes.UNKNOWN_DTYPE:
        from backend_spec.names.dtypes import dtype_names

        value = str(ctx.get("value"))
        bare = value.removeprefix("torch.")
        if bare != value and bare in dtype_names():
            return f"write '{bare}': dtypes are named without 'torch.'"
        match = close_matches(value, sorted(dtype_names()), n=2)
        return ("did you mean " + " or ".join(f"'{m}'" for m in match) + "?") if match else None
    choices = ctx.get("choices")
    if choices:  # a closed vocabulary: observation types, input types
        match = close_matches(str(ctx.get("value")).lower(), choices, n=1)
        return f"did you mean '{match[0]}'?" if match else "one of " + ", ".join(choices)
    return None  # the code's own hint
