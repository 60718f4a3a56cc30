"""**Why.** A fusion replaces `[nn.Conv2d, nn.ReLU]` by one `nni.ConvReLU2d` module. After that,
only an entry whose `pattern` is `nni.ConvReLU2d` and that has `dtype_configs` can quantize it.
Without one, prepare inserts no observers and the fused module runs in float: the fusion
silently costs the quantization of those ops. Entries of the `extends` base count. A fusion
with a BatchNorm makes its fused module only in QAT (post-training the BatchNorm folds into the
conv or linear), and the message says so.

```yaml
patterns:
  - pattern: [nn.Conv2d, nn.ReLU]
    fused_module: nni.ConvReLU2d                  # BS502
    fuser_method: {sequential: nni.ConvReLU2d}
```

**Fix.** Add the entry that quantizes the fused module, or drop the fusion:

```yaml
  - pattern: nni.ConvReLU2d
    dtype_configs: [weighted_int8]
    root_module: nn.Conv2d
    qat_module: nniqat.ConvReLU2d
    reference_quantized_module: nnqr.Conv2d
```
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec._torch import torch
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.labels import object_label

CODE = codes.DEAD_FUSION


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        fused = entry.name("fused_module")
        if fused is None or entry.model.fuser_method is None:
            continue
        if fused in context.quantized_ops:
            continue
        name = object_label(fused)
        yield Problem(
            (*entry.path, "fused_module"),
            f"{entry.label} fuses into {name}, but no pattern quantizes {name}, "
            f"so the fused module stays in float{_when(entry.ops)}",
            f"add a pattern entry 'pattern: {name}' with dtype_configs, or drop the fusion",
        )


def _when(ops: tuple | None) -> str:
    """When the fused module exists at all: a fusion with a BatchNorm makes it only for QAT
    (``prepare_qat_fx``); post-training, torch's fusers fold the BatchNorm into the first op."""
    if not ops or not any(_is_batch_norm(op) for op in ops[1:]):
        return ""
    return f" in QAT (post-training, the BatchNorm folds into {object_label(ops[0])})"


def _is_batch_norm(op: object) -> bool:
    return isinstance(op, type) and issubclass(op, torch.nn.modules.batchnorm._BatchNorm)
