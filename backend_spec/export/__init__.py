"""The exporter: torch ``BackendConfig`` objects -> spec text (YAML or TOML).

Stages, one module each: :mod:`.naming` (objects -> names that resolve back),
:mod:`.dtypes` (DTypeConfigs -> hoisted, named mappings), :mod:`.document` (a BackendConfig
-> a plain, format-neutral document; every unnameable object is reported here),
:mod:`.families` (group labels for comments), :mod:`.emit_yaml` / :mod:`.emit_toml` (layout).
"""

from __future__ import annotations

import importlib

from backend_spec._torch import BackendConfig, quiet
from backend_spec.export.document import SpecDocument, build_document
from backend_spec.export.emit_toml import emit_toml
from backend_spec.export.emit_yaml import emit_yaml
from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config

__all__ = ["SpecDocument", "build_document", "dump", "export_builtin"]

_EMITTERS = {"yaml": emit_yaml, "yml": emit_yaml, "toml": emit_toml}


def dump(backend_config: BackendConfig, format: str = "yaml") -> str:  # noqa: A002 (contract)
    """The spec text of ``backend_config`` in ``format`` (``"yaml"`` or ``"toml"``).

    Raises ``SpecError`` if an object of the config has no name a spec could load back
    (a lambda fuser, a local function), listing every such object.
    """
    emitter = _EMITTERS.get(format.lower())
    if emitter is None:
        raise ValueError(f"unknown spec format {format!r}; expected 'yaml' or 'toml'")
    return emitter(
        build_document(backend_config, source=f"<BackendConfig {backend_config.name!r}>")
    )


def export_builtin(name_or_ref: str) -> BackendConfig:
    """The BackendConfig ``bespec export`` exports: a built-in backend name (``fbgemm``) or a
    ``module:attr`` reference to a BackendConfig or a function returning one.

    ``module:attr`` imports ``module``: it is a command-line argument the user typed, so it
    is trusted like any script the user runs.
    """
    if name_or_ref in BUILTIN_BACKENDS:
        return builtin_backend_config(name_or_ref)
    module_name, colon, attr = name_or_ref.partition(":")
    if not colon or not module_name or not attr:
        known = ", ".join(BUILTIN_BACKENDS)
        raise ValueError(
            f"unknown backend {name_or_ref!r}: expected one of {known}, or module:attr"
        )
    return _import_backend_config(module_name, attr)


def _import_backend_config(module_name: str, attr: str) -> BackendConfig:
    try:
        with quiet():
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from exc
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, BackendConfig):
        with quiet():
            obj = obj()
    if not isinstance(obj, BackendConfig):
        raise ValueError(f"{module_name}:{attr} is a {type(obj).__name__}, not a BackendConfig")
    return obj
