"""What ``bespec export`` makes of its references when they name a pt2e Quantizer: the
quantizer's factory, and the user's probe models (``--probe-models``). Both are imported at
the command line, where a reference is trusted like a script the user runs; a reference
that names nothing usable is a ValueError (misuse, exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend_spec.export.quantizer import is_quantizer, is_quantizer_class, quantizer_factory
from backend_spec.names.importer import call_ref, import_ref, split_ref
from backend_spec.names.vocabulary import BUILTIN_BACKENDS


def quantizer_factory_of(ref: str) -> Callable[[], Any] | None:
    """A factory of fresh Quantizers when ``ref`` is ``module:attr`` naming a torchao pt2e
    Quantizer, a zero-argument function returning one, or a Quantizer class whose constructor
    needs no arguments; None for anything else (a spec, a
    built-in, a BackendConfig), which export handles as a BackendConfig."""
    if ref in BUILTIN_BACKENDS or Path(ref).is_file() or not split_ref(ref):
        return None
    obj = import_ref(ref)
    if is_quantizer(obj):
        return quantizer_factory(obj)
    if isinstance(obj, type):  # a Quantizer class built with no arguments is a factory too
        return obj if is_quantizer_class(obj) and is_quantizer(call_ref(obj, ref)) else None
    if callable(obj) and is_quantizer(call_ref(obj, ref)):
        return obj
    return None


def probe_model_of(ref: str) -> tuple[str, Any, tuple]:
    """``(label, model, example_inputs)`` from a factory reference."""
    made = call_ref(import_ref(ref), ref)
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], tuple)):
        raise ValueError(f"{ref} must return (model, example_inputs), a model and a tuple")
    return ref, made[0], made[1]
