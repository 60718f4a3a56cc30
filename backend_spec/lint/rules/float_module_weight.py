"""**Why.** FX quantizes a module's weight only by swapping the module for the reference
quantized module its class maps to (`root_module` + `reference_quantized_module`, merged over
every entry of the backend). A weighted module pattern whose dtype config quantizes the weight,
in a backend that maps no reference module for that class, is observed but never converted:
the model keeps the float module and its float weight, with no error. The pt2e quantizer
follows FX and leaves the weight unobserved.

```yaml
dtype_configs:
  weight_only: {input_dtype: float, output_dtype: float, weight_dtype: qint8}
patterns:
  - pattern: nn.Conv2d                              # BS542
    dtype_configs: [weight_only]
```

**Fix.** Add `root_module: nn.Conv2d` and `reference_quantized_module: nnqr.Conv2d` to the
entry (once per module class is enough), or write the functional pattern (`F.conv2d`), whose
weight is an input the quantizer observes as it is.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_fused_module_class, is_weighted_module
from backend_spec.names.labels import object_label

CODE = codes.FLOAT_MODULE_WEIGHT

#: Weight dtypes that leave the weight float (none, or a float dtype the module computes in).
_FLOAT_OR_NONE = frozenset({None, "float", "float32", "float16", "half", "bfloat16"})


def _weight_dtype(model: object) -> str | None:
    value = getattr(model, "weight_dtype", None)
    return value if isinstance(value, str) or value is None else getattr(value, "dtype", None)


def check(context: LintContext) -> Iterator[Problem]:
    reported: set[type] = set()
    for entry in context.entries:
        module = entry.single
        if (
            entry.model.root_module  # a root without a reference module is BS505
            or not is_weighted_module(module)
            or is_fused_module_class(module)
            or module in context.reference_roots
            or module in reported
        ):
            continue
        quantized = [
            u for u in context.dtype_uses(entry) if _weight_dtype(u.model) not in _FLOAT_OR_NONE
        ]
        if quantized:
            reported.add(module)
            name = object_label(module)
            yield Problem(
                entry.pattern_path,
                f"{name} quantizes its weight ({_weight_dtype(quantized[0].model)}), but no entry "
                f"maps {name} to a reference_quantized_module: convert keeps the float module "
                "and its float weight",
                _hint(module),
            )


def _hint(module: type) -> str:
    from backend_spec._torch import torch

    name = object_label(module)
    if hasattr(torch.ao.nn.quantized.reference, module.__name__):
        return f"add 'root_module: {name}' and 'reference_quantized_module: nnqr.{module.__name__}'"
    return f"add root_module: {name} with its reference_quantized_module"
