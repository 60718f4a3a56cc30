"""The intermediate form of a resolved backend, between name resolution and its consumers.

:mod:`.model` holds the frozen types (:class:`Backend`, :class:`Entry`, :class:`DTypeConfig`,
:class:`DTypeMapping`, :class:`FunctionRef`, :class:`Origin`); :mod:`.lift` makes one from a
torch ``BackendConfig``; :mod:`.carrier` is where the version 2 facts sit on the torch objects a
spec compiles to, read by :mod:`.lift` only. This package imports no stage above it.
"""

from backend_spec.ir.model import (
    POLICY_KEYS,
    AtenChain,
    Backend,
    DTypeConfig,
    DTypeMapping,
    Entry,
    FunctionRef,
    Origin,
)

__all__ = [
    "POLICY_KEYS",
    "AtenChain",
    "Backend",
    "DTypeConfig",
    "DTypeMapping",
    "Entry",
    "FunctionRef",
    "Origin",
]
