"""The exporter: torch ``BackendConfig`` objects -> spec text (YAML or TOML).

Stages, one module each: :mod:`.naming` (objects -> names that resolve back),
:mod:`.dtypes` (DTypeConfigs -> hoisted, named mappings), :mod:`.document` (a BackendConfig
-> a plain, format-neutral document; every unnameable object is reported here),
:mod:`.families` (group labels for comments), :mod:`.emit_yaml` / :mod:`.emit_toml` (layout).
"""

from __future__ import annotations

import warnings

from backend_spec._torch import BackendConfig, quiet
from backend_spec.export.document import SpecDocument, build_document
from backend_spec.export.emit_toml import emit_toml
from backend_spec.export.emit_yaml import emit_yaml
from backend_spec.specfile.schema import SCHEMA_NAME

__all__ = ["ExportWarning", "SpecDocument", "build_document", "dump", "emit", "name_from_ref"]

_EMITTERS = {"yaml": emit_yaml, "yml": emit_yaml, "toml": emit_toml}


def dump(
    backend_config: BackendConfig,
    format: str = "yaml",  # noqa: A002 (contract)
    *,
    name: str | None = None,
    base: str | None = None,
    schema_ref: str = SCHEMA_NAME,
) -> str:
    """The spec text of ``backend_config`` in ``format`` (``"yaml"`` or ``"toml"``).

    ``name`` replaces the config's name (a nameless config is written as ``unnamed_backend``
    otherwise); ``base`` (a built-in backend, or ``"auto"`` for the clearly closest one if
    any) writes ``extends:`` plus only the differences. Raises ``SpecError`` if an object of
    the config has no name a spec could load back (a lambda fuser, a local function),
    listing every such object. Warnings about repaired values are issued as
    :class:`ExportWarning`. The first line points editors at the JSON Schema at
    ``schema_ref``, a path relative to where the text will be saved or a URL; the default is a
    copy beside the file, which ``bespec export -o`` writes (``bespec schema -o`` anywhere).
    """
    if format.lower() not in _EMITTERS:
        raise ValueError(f"unknown spec format {format!r}; expected 'yaml' or 'toml'")
    with quiet():  # torch's deprecation noise (touched while naming objects) is not the caller's
        chosen = resolve_base(backend_config, base)
        document = build_document(backend_config, name=name, base=chosen)
    for note in document.notes:
        warnings.warn(str(note), ExportWarning, stacklevel=2)
    return emit(document, format, schema_ref)


def emit(
    document: SpecDocument,
    format: str,  # noqa: A002 (as dump's)
    schema_ref: str = SCHEMA_NAME,
) -> str:
    """The text of a built document in ``format`` (``"yaml"`` or ``"toml"``), its first line
    pointing editors at the schema at ``schema_ref``."""
    return _EMITTERS[format.lower()](document, schema_ref)


class ExportWarning(UserWarning):
    """Export repaired something torch accepted but could not use (see the message)."""


def resolve_base(backend_config: BackendConfig, base: str | None) -> str | None:
    """``base`` itself, or for ``"auto"`` the clearly closest built-in (None if none is)."""
    if base != "auto":
        return base
    from backend_spec.export.extends import closest_builtin

    return closest_builtin(backend_config)


def name_from_ref(ref: str) -> str:
    """A backend name for a nameless config, from the reference it was exported from:
    ``pkg.coreml:get_backend_config`` -> ``coreml``, ``pkg.mod:get_fast_config`` -> ``fast``."""
    target, _, attr = ref.rpartition(":")
    stem = attr.rsplit(".", 1)[-1].removeprefix("get_")
    for suffix in ("backend_config", "config"):
        if stem.endswith(suffix):
            stem = stem.removesuffix(suffix)
            break
    if stem.strip("_"):
        return stem.strip("_")
    module = target.removesuffix(".py").replace("\\", "/").rsplit("/", 1)[-1]
    return module.rsplit(".", 1)[-1] or "unnamed_backend"
