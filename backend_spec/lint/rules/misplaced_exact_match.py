"""**Why.** Exact-match constraints describe ops with a fixed output range (sigmoid, tanh,
hardsigmoid), whose QConfig must put a `FixedQParamsObserver` on the output. They make no sense
on a weighted op (its output range depends on its weights), on an op that shares its input's
observer or is not observed (it has no output observer of its own), on `weight_dtype`, or on
`input_dtype` alone. torch's own fixed-qparams configs put them on both input and output.

```yaml
  - pattern: F.linear
    dtype_configs:                                # BS509
      - input_dtype: quint8
        output_dtype: {dtype: quint8, scale_exact_match: 0.00390625, zero_point_exact_match: 0}
```

**Fix.** Remove the exact-match constraints, or move them to the output of a fixed-range op
with the default observation type.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import DTypeUse, LintContext, PatternEntry, Problem
from backend_spec.lint.ops import is_weighted_op
from backend_spec.specfile.models import DTypeWithConstraintsModel

CODE = codes.MISPLACED_EXACT_MATCH

_DEFAULT_OBSERVATION = "output_use_different_observer_as_input"


def _fixed(value: object) -> bool:
    return isinstance(value, DTypeWithConstraintsModel) and (
        value.scale_exact_match is not None or value.zero_point_exact_match is not None
    )


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        for use in context.dtype_uses(entry):
            reason = _reason(context, entry, use)
            if reason:
                yield Problem(use.ref_path, reason, "remove the exact-match constraints here")


def _reason(context: LintContext, entry: PatternEntry, use: DTypeUse) -> str:
    model = use.model
    fixed_output = _fixed(model.output_dtype)
    if not (fixed_output or _fixed(model.input_dtype) or _fixed(model.weight_dtype)):
        return ""
    label = entry.label
    root = entry.name("root_module") or entry.root_op
    if is_weighted_op(root):
        return f"fixed qparams on weighted op {label}: its output range depends on its weights"
    if _fixed(model.weight_dtype):
        return "fixed qparams on weight_dtype: weights are observed by the weight observer"
    observation = entry.model.observation_type or _DEFAULT_OBSERVATION
    if observation != _DEFAULT_OBSERVATION:
        return (
            f"fixed qparams on {label}, whose observation type is {observation}: "
            "only an op with its own output observer can have fixed qparams"
        )
    if not fixed_output:
        return "fixed qparams on input_dtype only; they belong on output_dtype"
    return ""
