"""A fusion produces a fused module that no pattern quantizes, so it stays in float.

Fusing ``[nn.Conv2d, nn.ReLU]`` into ``nni.ConvReLU2d`` replaces the two modules by one; from
then on only a pattern whose ``pattern`` is ``nni.ConvReLU2d`` (with ``dtype_configs``) can
quantize it. Without one, prepare finds nothing to observe and the fused module runs in float:
the fusion silently costs the quantization of those ops. Patterns brought in by ``extends``
count.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.labels import entry_label, name_of

ID = "BS502"
NAME = "dead-fusion"
SEVERITY = "warning"


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        fused = context.module(entry.model.fused_module)
        if fused is None or entry.model.fuser_method is None:
            continue
        if fused in context.quantized_ops:
            continue
        name = name_of(fused)
        yield Problem(
            (*entry.path, "fused_module"),
            f"{entry_label(entry)} fuses into {name}, but no pattern quantizes {name}, "
            "so the fused module stays in float",
            f"add a pattern entry 'pattern: {name}' with dtype_configs, or drop the fusion",
        )
