"""**Why.** A `pattern` list names ops in forward order: the order the model runs them. Chains
that quantization fuses always run a weighted op (linear, conv) first, then batch norm, then
an activation: `[nn.Conv2d, nn.BatchNorm2d, nn.ReLU]`. A list in another order, such as
`[nn.ReLU, nn.Conv2d]`, is usually torch's reversed nested format written as a forward list:
it matches a ReLU feeding a conv, which the intended models do not contain, so the fusion and
the quantization of the real chain silently never happen.

```yaml
  - pattern: [nn.ReLU, nn.Conv2d]                 # BS514: did you mean [nn.Conv2d, nn.ReLU]?
    fused_module: nni.ConvReLU2d
```

**Fix.** Write the ops in the order the model runs them (or use `pattern_complex_format` for
torch's reversed nested format).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec._torch import torch
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_weighted_op
from backend_spec.names.labels import object_label
from backend_spec.names.resolver import is_module_class

CODE = codes.REVERSED_CHAIN

_ACTIVATIONS = frozenset(
    {"relu", "relu6", "hardtanh", "leakyrelu", "hardswish", "hardsigmoid", "elu", "gelu"}
    | {"silu", "sigmoid", "tanh", "mish"}
)
_STAGES = ("a weighted op", "batch norm", "an activation")


def _stage(op: Any) -> int | None:
    """0 weighted, 1 batch norm, 2 activation (the forward order of a fused chain)."""
    if is_weighted_op(op):
        return 0
    if is_module_class(op) and issubclass(op, torch.nn.modules.batchnorm._BatchNorm):
        return 1
    name = str(getattr(op, "__name__", "")).lower().replace("_", "")
    if name == "batchnorm":
        return 1
    return 2 if name in _ACTIVATIONS else None


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        if entry.ops is None or len(entry.ops) < 2:
            continue
        stages = [_stage(op) for op in entry.ops]
        for i in range(len(stages) - 1):
            first, then = stages[i], stages[i + 1]
            if first is None or then is None or first <= then:
                continue
            names = [object_label(op) for op in entry.ops]
            message = (
                f"the chain runs {names[i]} before {names[i + 1]}, but fused chains run "
                f"{_STAGES[then]} before {_STAGES[first]}; patterns list ops in forward order"
            )
            hint = "write the ops in the order the model runs them"
            if None not in stages:
                order = sorted(range(len(names)), key=lambda k: stages[k])
                hint = "did you mean [" + ", ".join(names[k] for k in order) + "]?"
            yield Problem(entry.pattern_path, message, hint)
            break
