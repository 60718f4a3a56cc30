"""bespec: compile declarative YAML/TOML backend specs into torch ``BackendConfig`` objects.

The public API is small and stable; the file format is described in ``docs/format.md``::

    bc = backend_spec.load("specs/my_backend.yaml")
    bc = backend_spec.loads(text, format="yaml")
    text = backend_spec.dump(bc, format="yaml")
    qmap = backend_spec.qconfig_mapping(bc)
    q = backend_spec.quantizer("specs/my_backend.yaml")   # torchao pt2e Quantizer (extra)

Everything that needs torch loads on first use, so importing the package (as the ``bespec``
command does before every command) costs no torch import; a ``load`` benchmark warms up first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend_spec.diagnostics import Diagnostic, Severity, SpecError

__version__ = "0.1.0"

#: The newest version of the spec format this bespec reads and writes (a test holds it equal to
#: the newest ``spec_version`` the loader accepts).
SPEC_VERSION = 12

_LAZY = {
    "load": "backend_spec.compiler.loader",
    "loads": "backend_spec.compiler.loader",
    "dump": "backend_spec.export",
    "qconfig_mapping": "backend_spec.analysis.qconfigs",
    "quantizer": "backend_spec.pt2e",
}

__all__ = [
    "SPEC_VERSION",
    "Diagnostic",
    "Severity",
    "SpecError",
    "dump",
    "load",
    "loads",
    "qconfig_mapping",
    "quantizer",
]

if TYPE_CHECKING:
    from backend_spec.analysis.qconfigs import qconfig_mapping
    from backend_spec.compiler.loader import load, loads
    from backend_spec.export import dump
    from backend_spec.pt2e import quantizer


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'backend_spec' has no attribute {name!r}")
    import importlib

    from backend_spec.quiet import quiet

    with quiet():  # torch's import-time deprecation warnings stay out of the caller's output
        return getattr(importlib.import_module(module_name), name)
