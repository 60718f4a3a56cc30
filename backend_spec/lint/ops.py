"""What kind of op a pattern names, as far as quantization cares.

"Weighted" means an op whose weight quantization quantizes (and which needs a reference
quantized module to be lowered): linear, conv, transposed conv, embeddings and RNNs, in module
or functional form, including their fused (``nni``) and QAT forms. Norm layers and PReLU have
a ``weight`` too, but quantization leaves it in float, so they are not weighted here.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from backend_spec._torch import torch
from backend_spec.names.resolver import is_module_class


@cache
def _weighted_bases() -> tuple[type, ...]:
    nn = torch.nn
    return (
        nn.Linear,
        nn.modules.conv._ConvNd,
        nn.Embedding,
        nn.EmbeddingBag,
        nn.modules.rnn.RNNBase,
        nn.modules.rnn.RNNCellBase,
    )


@cache
def _weighted_functions() -> frozenset[Any]:
    F = torch.nn.functional
    names = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d")
    names += ("conv_transpose3d", "embedding", "embedding_bag")
    functions = {getattr(F, n) for n in names if hasattr(F, n)}
    functions |= {getattr(torch, n) for n in names if hasattr(torch, n)}
    return frozenset(functions)


def is_fused_module_class(obj: Any) -> bool:
    """An ``nni`` fused module (a Sequential of float modules, such as ConvReLU2d)."""
    from torch.ao.nn.intrinsic import _FusedModule

    return is_module_class(obj) and issubclass(obj, _FusedModule)


def is_weighted_module(obj: Any) -> bool:
    """A module class whose weight gets quantized (nn.Linear, nn.Conv2d, nnqat.Linear...)."""
    if not is_module_class(obj):
        return False
    if issubclass(obj, _weighted_bases()):
        return True
    # nni fused modules wrap their root in a Sequential: ConvReLU2d, LinearBn1d, ConvAdd2d.
    return is_fused_module_class(obj) and obj.__name__.startswith(("Conv", "Linear"))


def is_weighted_op(op: Any) -> bool:
    """A weighted module class or a weighted functional (F.linear, F.conv2d...)."""
    if is_module_class(op):
        return is_weighted_module(op)
    try:
        return op in _weighted_functions()
    except TypeError:  # unhashable op
        return False


def is_quantized_module(obj: Any) -> bool:
    """A class of the quantized namespaces (nnq, nnqr, nnqd, nniq...): never in a float model."""
    module = getattr(obj, "__module__", "") or ""
    return is_module_class(obj) and module.startswith(
        ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")
    )


def float_modules_of(qat_module: type) -> tuple[type, ...]:
    """The float module classes a QAT class converts from (its ``_FLOAT_MODULE``), or ()."""
    declared = getattr(qat_module, "_FLOAT_MODULE", None)
    if isinstance(declared, type):
        return (declared,)
    if isinstance(declared, tuple):
        return tuple(c for c in declared if isinstance(c, type))
    return ()
