"""**Why.** `customized_qrange: false` (version 8) builds the observer without `quant_min` /
`quant_max`, as a pt2e qspec that leaves them unset does: torch's observer then keeps its
dtype's own range and computes a symmetric `uint8` zero point as 128 rather than
`(quant_min + quant_max) // 2` = 127. A mapping that also narrows the range
(`quant_min_lower_bound`, `quant_max_upper_bound` inside the dtype's range, or
`reduce_range: true`) needs that range passed, so the observer is built with it and the key
has no effect.

```yaml
    input_dtype: {dtype: quint8, qscheme: symmetric, customized_qrange: false,  # BS547
                  quant_max_upper_bound: 127}
```

**Fix.** Remove `customized_qrange: false`, or the bounds that narrow the range.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.models import DTypeWithConstraintsModel, dtype_range

CODE = codes.NARROWED_UNCUSTOMIZED_QRANGE

_ROLES = ("input_dtype", "output_dtype", "weight_dtype")


def check(context: LintContext) -> Iterator[Problem]:
    seen: set[tuple] = set()
    for entry in context.entries:
        for use in context.dtype_uses(entry):
            for role in _ROLES:
                where = context.doc.canonical((*use.definition_path, role))  # anchors
                narrowed = _narrowing(getattr(use.model, role))
                if narrowed and where not in seen:
                    seen.add(where)
                    yield Problem(
                        where,
                        f"customized_qrange: false with {narrowed}, which narrows the range: "
                        "the observer is built with that range, so the key has no effect",
                        "remove customized_qrange: false or the narrowing keys",
                    )


def _narrowing(value: object) -> str:
    """The keys that narrow an uncustomized mapping's range ('' when none, or customized)."""
    if not isinstance(value, DTypeWithConstraintsModel) or value.customized_qrange is not False:
        return ""
    lowest, highest = dtype_range(value.dtype) or (None, None)
    keys = []
    if value.quant_min_lower_bound is not None and value.quant_min_lower_bound != lowest:
        keys.append("quant_min_lower_bound")
    if value.quant_max_upper_bound is not None and value.quant_max_upper_bound != highest:
        keys.append("quant_max_upper_bound")
    if value.reduce_range:
        keys.append("reduce_range: true")
    return " and ".join(keys)
