"""**Why.** `averaging_constant` (version 9) is the moving-average observer's: how much of each
batch's min/max enters the running range (torch's default 0.01; a dynamic QAT fake-quantize
uses 1, the last batch only). Only a mapping that observes with a moving average uses it:
`observer: moving_average_minmax`, or `fake_quant: fused_moving_avg` (which always wraps a
moving average). On any other mapping the observer is built without it, so the key says
something the backend does not do. A dynamic mapping observes with a placeholder unless its
`observer` is `minmax` or `moving_average_minmax`.

```yaml
    input_dtype: {dtype: qint8, observer: minmax, averaging_constant: 1}   # BS548
```

**Fix.** Set `observer: moving_average_minmax` (or `fake_quant: fused_moving_avg`), or remove
`averaging_constant`.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.models import DTypeWithConstraintsModel

CODE = codes.UNUSED_AVERAGING_CONSTANT

_ROLES = ("input_dtype", "output_dtype", "weight_dtype")


def check(context: LintContext) -> Iterator[Problem]:
    seen: set[tuple] = set()
    for entry in context.entries:
        for use in context.dtype_uses(entry):
            dynamic = bool(use.model.is_dynamic)
            for role in _ROLES:
                value = getattr(use.model, role)
                where = context.doc.canonical((*use.definition_path, role))  # anchors
                if _unused(value, dynamic and role != "weight_dtype") and where not in seen:
                    seen.add(where)
                    yield Problem(
                        where,
                        f"averaging_constant {value.averaging_constant} on a mapping that "
                        f"observes with {value.observer or 'minmax'}, no moving average: the "
                        "key has no effect",
                        "set observer: moving_average_minmax, or remove averaging_constant",
                    )


def _unused(value: object, dynamic: bool) -> bool:
    """Whether a mapping sets an averaging constant no observer of it takes."""
    if not isinstance(value, DTypeWithConstraintsModel) or value.averaging_constant is None:
        return False
    if dynamic:  # a placeholder unless it names a moving average (minmax takes no constant)
        return value.observer != "moving_average_minmax"
    return value.observer != "moving_average_minmax" and value.fake_quant != "fused_moving_avg"
