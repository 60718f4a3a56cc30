"""The intermediate form of a resolved backend, between name resolution and its consumers.

:mod:`.model` holds the frozen types (:class:`Backend`, :class:`Entry`, :class:`DTypeConfig`,
:class:`DTypeMapping`, :class:`FunctionRef`, :class:`Origin`); the compiler makes one from a
spec; :mod:`.lift` makes one from a torch ``BackendConfig`` (the only reader of torch objects
here); :mod:`.lower` lowers one to a plain torch ``BackendConfig`` that keeps it, and
:func:`~backend_spec.ir.lower.backend_of` is how a reader given any BackendConfig gets its
intermediate form. This package imports no stage above it.
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
    policy_value,
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
    "policy_value",
]
