"""**Why.** For QAT, prepare swaps each matched module for `qat_module` (through its `from_float`),
and convert turns it back with `to_float` before building the reference module. So the QAT
class must be a subclass of `root_module` (or, like coremltools' QAT classes, provide its own
`from_float` and `to_float`) and must convert from the float module the pattern matches: the
fused module for fused patterns (`nni.ConvReLU2d` -> `nniqat.ConvReLU2d`), else the pattern's
module (`nn.Linear` -> `nnqat.Linear`). A QAT class with a `from_float` of its own may declare a
base class as its `_FLOAT_MODULE` and take its subclasses (spconv does): that is accepted.
Quantized classes (`nnq.Linear`) and the float class itself are not QAT modules.

```yaml
  - pattern: nni.ConvReLU2d
    root_module: nn.Conv2d
    qat_module: nnqat.Conv2d                      # BS506: converts from nn.Conv2d
```

**Fix.** Use the QAT class of the matched module, here `nniqat.ConvReLU2d`.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, PatternEntry, Problem
from backend_spec.lint.ops import float_modules_of, is_module_class, is_quantized_module
from backend_spec.names.labels import object_label

CODE = codes.QAT_MODULE_MISMATCH


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        qat = entry.name("qat_module")
        if qat is None:
            continue
        message = _mismatch(entry, qat)
        if message:
            yield Problem((*entry.path, "qat_module"), message, _hint(entry))


def _expected_float(entry: PatternEntry) -> type | None:
    fused = entry.name("fused_module")
    if fused is not None:
        return fused
    return entry.single if is_module_class(entry.single) else None


def _mismatch(entry: PatternEntry, qat: type) -> str:
    name = object_label(qat)
    if is_quantized_module(qat):
        return f"qat_module {name} is a quantized module, not a QAT module"
    root = entry.name("root_module")
    expected = _expected_float(entry)
    if qat is expected or (qat is root and not float_modules_of(qat)):
        return f"qat_module {name} is the float module itself, not its QAT form"
    if root is not None and not issubclass(qat, root) and not _converts_itself(qat):
        return (
            f"qat_module {name} is not a subclass of root_module {object_label(root)} "
            "and has no from_float/to_float of its own"
        )
    floats = float_modules_of(qat)
    if expected is not None and floats and not _converts_from(qat, floats, expected):
        return (
            f"qat_module {name} converts from {', '.join(map(object_label, floats))}, "
            f"not from {object_label(expected)}"
        )
    return ""


def _converts_from(qat: type, floats: tuple[type, ...], expected: type) -> bool:
    """Whether ``qat.from_float`` takes the ``expected`` float module. torch's own from_float
    wants exactly a declared ``_FLOAT_MODULE``; a QAT class's own from_float (spconv's) may
    declare a base class and take its subclasses (``issubclass(type(mod), _FLOAT_MODULE)``):
    it is given the benefit of the doubt, since reading it would mean running it."""
    if expected in floats:
        return True
    own = getattr(qat, "from_float", None)
    return own is not None and not _torch_defined(own) and issubclass(expected, floats)


def _torch_defined(function: object) -> bool:
    module = getattr(getattr(function, "__func__", function), "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def _converts_itself(qat: type) -> bool:
    """A QAT class outside the root's hierarchy still works when it converts itself: prepare
    calls ``qat.from_float(float_module)`` and convert calls ``module.to_float()`` before
    building the reference module (coremltools' QAT classes work this way)."""
    return callable(getattr(qat, "from_float", None)) and callable(getattr(qat, "to_float", None))


def _hint(entry: PatternEntry) -> str:
    from backend_spec._torch import torch

    expected = _expected_float(entry)
    if expected is None:
        return "use the QAT class of the pattern's module"
    for namespace, alias in (
        (torch.ao.nn.intrinsic.qat, "nniqat"),
        (torch.ao.nn.qat, "nnqat"),
    ):
        candidate = getattr(namespace, expected.__name__, None)
        if candidate is not None and expected in float_modules_of(candidate):
            return f"use {alias}.{expected.__name__}"
    return "use the QAT class of " + object_label(expected)
