"""The exporter: torch ``BackendConfig`` objects -> spec text (YAML or TOML).

Stages, one module each: :mod:`.naming` (objects -> names that resolve back),
:mod:`.dtypes` (DTypeConfigs -> hoisted, named mappings), :mod:`.document` (a BackendConfig
-> a plain, format-neutral document; every unnameable object is reported here),
:mod:`.families` (group labels for comments), :mod:`.emit_yaml` / :mod:`.emit_toml` (layout).
"""

from __future__ import annotations

from backend_spec._torch import BackendConfig
from backend_spec.export.document import SpecDocument, build_document
from backend_spec.export.emit_toml import emit_toml
from backend_spec.export.emit_yaml import emit_yaml

__all__ = ["SpecDocument", "build_document", "dump"]

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
