"""**Why.** An op that shares one observer across its inputs and output
(`output_share_observer_with_input` on `torch.cat`, `torch.stack`, a binary op) has every input
quantized with that observer by FX, including an input computed by an op the spec leaves float.
FX then puts a quantize right after that float op, and `convert_fx`'s lowering rewrites
`dequantize -> op -> quantize` to run the op on quantized tensors, without looking at the op's
other users. Where the float op also feeds another float op (`y * sigmoid(y)` with no entry for
`mul` or `sigmoid`), that op receives a quantized tensor and the lowered model fails
(`promoteTypes with quantized numbers`). Ops that read a float op's output with an observer
of their own (a conv's input) do the same, but that is torch's lowering, not a choice of the
spec's, and `check` reports it as such. The ops listed are the ones torch's own native
backend quantizes without weights (so its lowering knows them) and this spec does not.

```yaml
  - pattern: torch.cat                          # BS530: no entry for operator.mul, nn.Sigmoid...
    observation_type: output_share_observer_with_input
    dtype_configs: [act_only]
```

**Fix.** Give the ops that feed it entries of their own (`operator.mul`, `nn.Sigmoid`, ...), or
let the op observe its output on its own (`output_use_different_observer_as_input`). `bespec
check` fails a model that trips on it and names the node, the float op and this entry's line.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from backend_spec import codes
from backend_spec._torch import quiet
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_weighted_op
from backend_spec.names.labels import object_label

CODE = codes.SHARED_OBSERVER_FLOAT_INPUT

#: Ops that take several tensors, so that sharing one observer spans several producers.
_MULTI_INPUT = ("cat", "concat", "concatenate", "stack", "add", "mul", "iadd", "imul")

#: How many unclaimed ops a message names before it says "and N more".
_SHOWN = 4


def _multi_input(op: Any) -> bool:
    return getattr(op, "__name__", None) in _MULTI_INPUT or (
        isinstance(op, str) and op in _MULTI_INPUT
    )


@cache
def _lowered_without_weights() -> tuple[Any, ...]:
    """Single ops that compute new values from one tensor without weights, which torch's
    native backend quantizes with an observer of their own (``hardswish``, ``sigmoid``,
    ``layer_norm``...), in its order: the ops ``convert_fx``'s lowering rewrites to run on
    quantized tensors when a quantize follows them. Ops that share their input's observer
    (pooling, reshape) and binary ops are left out: their lowering needs quantized inputs."""
    with quiet():
        from torch.ao.quantization.backend_config import (
            ObservationType,
            get_native_backend_config,
        )

        configs = get_native_backend_config().configs
    found: dict[Any, None] = {}
    for config in configs:
        op = config.pattern
        if op is None or isinstance(op, tuple) or not config.dtype_configs:
            continue
        if (
            config.observation_type == ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
            and not config._num_tensor_args_to_observation_type
            and not is_weighted_op(op)
            and not _multi_input(op)
            and all(d.weight_dtype is None for d in config.dtype_configs)
        ):
            found[op] = None
    return tuple(found)


def check(context: LintContext) -> Iterator[Problem]:
    sharing = [
        entry
        for entry in context.entries
        if entry.model.observation_type == "output_share_observer_with_input"
        and entry.model.dtype_configs
        and _multi_input(entry.single)
    ]
    if not sharing:
        return
    claimed = context.quantized_ops
    unclaimed = [op for op in _lowered_without_weights() if op not in claimed]
    if not unclaimed:
        return
    names = ", ".join(object_label(op) for op in unclaimed[:_SHOWN])
    more = f" and {len(unclaimed) - _SHOWN} more" if len(unclaimed) > _SHOWN else ""
    for entry in sharing:
        yield Problem(
            (*entry.path, "observation_type"),
            f"{entry.label} shares one observer across its inputs: FX quantizes an input that "
            f"an op the spec leaves float computed (no entry for {names}{more}), and "
            "convert_fx's lowering may then run that op on quantized tensors, which fails "
            "where it also feeds a float op",
            "give the ops that feed it entries of their own, or observe its output on its own "
            "(output_use_different_observer_as_input); `bespec check` names the node when a "
            "model trips on it",
        )
