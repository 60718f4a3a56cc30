"""**Why.** `output_share_observer_with_input` is for ops whose output lies in the input's range
(max pooling, reshape, cat). A weighted op's output range depends on its weights; giving its
output the input's quantization parameters clips it or wastes its range.

```yaml
  - pattern: nn.Conv2d
    observation_type: output_share_observer_with_input   # BS510
```

**Fix.** Use `output_use_different_observer_as_input` (the default): drop the key.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_weighted_op

CODE = codes.WEIGHTED_OP_SHARES_OBSERVER


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        if entry.model.observation_type != "output_share_observer_with_input":
            continue
        root = entry.name("root_module") or entry.root_op
        if is_weighted_op(root):
            yield Problem(
                (*entry.path, "observation_type"),
                f"weighted op {entry.label} cannot share its input's observer: "
                "its output range depends on its weights",
                "use output_use_different_observer_as_input (the default)",
            )
