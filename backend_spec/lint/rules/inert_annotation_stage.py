"""**Why.** `annotation_stage` (version 8) orders the pt2e runtime's annotation in passes, so
that a condition on a producer (`quantize: if_input_quantized` or `if_all_inputs_quantized`,
`input_observer: upstream` or `upstream_only`) sees only the producers of earlier stages
(LiteRT's pool, annotated after conv and linear but before the shape ops). Stages change
nothing else: which entry matches which nodes is decided before any is annotated. So a stage
is inert, and probably a mistake (a stage meant for another entry, a condition left out), when
no entry of the spec has such a condition, or when every entry (one without the key is stage 0)
is in the same stage: the runtime then annotates in graph order, as without the key.

```yaml
  - pattern: nn.Conv2d
    dtype_configs: [w8a8]
    annotation_stage: 1          # BS541: no entry reads whether its producer is annotated
  - pattern: nn.MaxPool2d
    observation_type: output_share_observer_with_input
    dtype_configs: [act]
```

**Fix.** Add the condition the stage is for (`quantize: if_input_quantized` on the pool) or
remove the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.INERT_ANNOTATION_STAGE

#: Policy values that read whether a producer is already annotated.
_CONDITIONS = {
    "quantize": ("if_input_quantized", "if_all_inputs_quantized"),
    "input_observer": ("upstream", "upstream_only"),
}


def check(context: LintContext) -> Iterator[Problem]:
    entries = list(context.entries)
    staged = [entry for entry in entries if entry.model.annotation_stage is not None]
    if not staged:
        return
    reason = _inert(entries)
    if reason is None:
        return
    for entry in staged:
        yield Problem(
            (*entry.path, "annotation_stage"),
            f"{entry.label}: annotation_stage changes nothing: {reason}",
            "add the producer condition the stage is for, or remove the key",
        )


def _inert(entries: list[Any]) -> str | None:
    """Why the spec's stages cannot change what is annotated, or None when they can."""
    if not any(_reads_producer(entry.model) for entry in entries):
        return "no entry of the spec has a condition on its producer"
    if len({entry.model.annotation_stage or 0 for entry in entries}) == 1:
        return "every entry is in the same stage, so the runtime annotates in graph order"
    return None


def _reads_producer(model: Any) -> bool:
    return any(getattr(model, key) in values for key, values in _CONDITIONS.items())
