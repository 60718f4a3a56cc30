"""**Why.** prepare gives a weighted op's bias the dtype `float` (`float16` only when both the
activation and the weight are `float16`), and a dtype config applies only when its `bias_dtype`
equals that. So `bias_dtype: int32` (or `qint32`) on a linear or conv pattern never matches any
QConfig: torch silently leaves every module of the pattern unconverted, and `bespec check`
then finds the float module where the reference quantized module should be. The quantized
kernels quantize the bias themselves, from the input and weight scales.

```yaml
dtype_configs:
  w8a8:
    input_dtype: quint8
    weight_dtype: qint8
    bias_dtype: int32                             # BS513
patterns:
  - pattern: nn.Linear
    dtype_configs: [w8a8]
```

**Fix.** Write `bias_dtype: float` (or leave it out).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_weighted_op
from backend_spec.specfile.models import DTypeConfigModel

CODE = codes.NON_FLOAT_BIAS

_FLOAT = frozenset({"float", "float32"})
_HALF = frozenset({"float16", "half"})


def _dtype_name(value: object) -> str | None:
    return value if isinstance(value, str) or value is None else getattr(value, "dtype", None)


def _bias_matches(model: DTypeConfigModel) -> bool:
    """Whether the bias dtype can equal the one prepare derives for a weighted op."""
    bias = _dtype_name(model.bias_dtype)
    if bias is None or bias in _FLOAT:
        return True
    half = _dtype_name(model.input_dtype) in _HALF and _dtype_name(model.weight_dtype) in _HALF
    return bias in _HALF and half


def check(context: LintContext) -> Iterator[Problem]:
    seen: set[object] = set()  # a config is reported once, for its first weighted use
    for entry in context.entries:
        root = entry.name("root_module") or entry.root_op
        if not is_weighted_op(root):
            continue
        for use in context.dtype_uses(entry):
            where = context.doc.canonical((*use.definition_path, "bias_dtype"))  # anchors
            if where not in seen and not _bias_matches(use.model):
                seen.add(where)
                bias = _dtype_name(use.model.bias_dtype)
                yield Problem(
                    where,
                    f"bias_dtype {bias} on weighted pattern {entry.label} never matches: "
                    "prepare gives a weighted op a float bias, so torch leaves it unconverted",
                    "write bias_dtype: float (the quantized kernel quantizes the bias itself)",
                )
