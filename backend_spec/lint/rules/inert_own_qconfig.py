"""**Why.** `qconfig: own` (version 11) makes the pt2e runtime quantize an entry's nodes
with the QConfig of the entry's own first usable dtype config, not with the QConfig of its
first op, which that op's own entry decides (FX's rule: a chain whose dtype configs the first
op's QConfig does not meet stays float). On a one-op pattern the two are the same QConfig:
the op's own entry is this one. So the key changes nothing, and probably sits on the wrong
entry: the chain that starts with the op was meant.

```yaml
  - pattern: F.conv2d
    dtype_configs: [dynamic]
    qconfig: own                 # BS551: F.conv2d's QConfig is this entry's already
  - pattern: [F.conv2d, F.relu]
    dtype_configs: [static]      # stays float: F.conv2d's QConfig is dynamic
```

**Fix.** Move the key to the chain that its first op's QConfig does not satisfy, or remove
it.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.INERT_OWN_QCONFIG


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        if entry.model.qconfig == "own" and entry.single is not None:
            yield Problem(
                (*entry.path, "qconfig"),
                f"{entry.label}: qconfig: own changes nothing on a one-op pattern: the "
                "QConfig of its op is this entry's already",
                "put the key on the chain its first op's QConfig does not satisfy, or remove it",
            )
