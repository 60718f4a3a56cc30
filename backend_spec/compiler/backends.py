"""One backend reference, three spellings: a spec file, a built-in name, or ``module:attr``.

Every command that takes a backend (``export``, ``diff``, ``docs``, ``show``, ``check``,
``explain``) decides which of the three it was given here, in this order:

1. an existing file is a spec (so a file called ``native`` can still be compared);
2. a built-in torch backend name (``fbgemm``, ``x86``, ...);
3. ``module:attr`` or ``file.py:attr``: a BackendConfig, or a function of no arguments returning
   one, imported by :mod:`backend_spec.names.importer` (the user typed it, so it is trusted).

A spec's own ``extends`` is not a reference of this kind: it never imports, and the loader
resolves it (a built-in name, else a path relative to the spec).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from backend_spec._torch import BackendConfig
from backend_spec.compiler.compiler import Compiled, Origin
from backend_spec.compiler.loader import builtin_compiled, compile_file
from backend_spec.names.importer import object_of, split_ref
from backend_spec.names.vocabulary import BUILTIN_BACKENDS

__all__ = ["load_backend", "load_compiled"]


def load_compiled(
    ref: str, allow_imports: Iterable[str] = (), *, allow_extends_outside: bool = False
) -> Compiled:
    """The compiled backend ``ref`` names, with the origin of each pattern.

    ``allow_imports`` is the allow-list of a spec file (and ``allow_extends_outside`` lifts its
    ``extends`` confinement). Raises ``SpecError`` for a spec with problems and ``ValueError``
    (one line) for a reference that names no BackendConfig.
    """
    if Path(ref).is_file():
        return compile_file(ref, allow_imports, allow_extends_outside=allow_extends_outside)
    if ref in BUILTIN_BACKENDS:
        return builtin_compiled(ref)
    if split_ref(ref) is not None:
        return Compiled.of_config(object_of(ref, BackendConfig, "BackendConfig"), Origin(ref))
    raise ValueError(
        f"{ref!r} is neither a spec file, a built-in backend ({', '.join(BUILTIN_BACKENDS)}), "
        "nor module:attr"
    )


def load_backend(ref: str, allow_imports: Iterable[str] = ()) -> BackendConfig:
    """The BackendConfig ``ref`` names (see :func:`load_compiled`): for a built-in or a
    ``module:attr``, torch's own object."""
    compiled = load_compiled(ref, allow_imports)
    return compiled.lifted_from if compiled.lifted_from is not None else compiled.backend_config
