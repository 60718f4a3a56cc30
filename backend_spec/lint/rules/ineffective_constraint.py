"""**Why.** torch (2.13) checks a dtype's quant range only when both `quant_min_lower_bound` and
`quant_max_upper_bound` are set, fixed qparams only when both `scale_exact_match` and
`zero_point_exact_match` are set, and never checks `scale_max_upper_bound`. A lone bound
constrains nothing. Constraints on a floating dtype can never be met: the observers of
floating dtypes have no quant range and no eps, so torch rejects every QConfig for that dtype
config.

```yaml
    input_dtype: {dtype: quint8, quant_max_upper_bound: 127}    # BS508
    output_dtype: {dtype: float16, scale_min_lower_bound: 0.001} # BS508
```

**Fix.** Give both bounds of a pair (`quant_min_lower_bound: 0, quant_max_upper_bound: 127`),
drop `scale_max_upper_bound`, and write floating dtypes without constraints.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.dtypes import dtype_range
from backend_spec.specfile.models import DTypeWithConstraintsModel

CODE = codes.INEFFECTIVE_CONSTRAINT

_PAIRS = (
    ("quant_min_lower_bound", "quant_max_upper_bound", "the quant range"),
    ("scale_exact_match", "zero_point_exact_match", "fixed qparams"),
)
_FIELDS = ("input_dtype", "output_dtype", "weight_dtype")


def check(context: LintContext) -> Iterator[Problem]:
    for path, model in context.dtype_definitions():
        for field in _FIELDS:
            value = getattr(model, field)
            if isinstance(value, DTypeWithConstraintsModel):
                yield from _constraint_problems((*path, field), value)


def _constraint_problems(path: tuple, value: DTypeWithConstraintsModel) -> Iterator[Problem]:
    given = value.model_fields_set - {"dtype"}
    if given and dtype_range(value.dtype) is None:
        yield Problem(
            path,
            f"constraints on {value.dtype} can never be met: observers of a floating dtype "
            "have no quant range or eps, so torch rejects every QConfig for this dtype config",
            f"write '{value.dtype}' without constraints",
        )
        return
    for first, second, what in _PAIRS:
        for present, missing in ((first, second), (second, first)):
            if present in given and missing not in given:
                yield Problem(
                    (*path, present),
                    f"{present} without {missing} is ignored: torch checks {what} "
                    "only when both are set",
                    f"add {missing}, or remove {present}",
                    at_key=True,
                )
    if "scale_max_upper_bound" in given:
        yield Problem(
            (*path, "scale_max_upper_bound"),
            "scale_max_upper_bound is never checked by torch's QConfig/DTypeConfig matching",
            "remove it, or check the scale elsewhere",
            at_key=True,
        )
