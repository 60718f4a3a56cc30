"""**Why.** `claim_stage` (version 10) makes the pt2e runtime claim nodes pass by pass: the
entries of stage 0 first, over the whole graph, then those of stage 1 on the nodes left, and so
on (X86InductorQuantizer's per-type config claims Linear + add before its global config's
longer conv + BatchNorm + add). Within a stage, the longest chain claims first, then spec
order, as without the key. So when every entry is in the same claim stage (an entry without
the key is stage 0), the key changes nothing, and probably is a mistake: a stage meant for
another entry, or one entry's key left out.

```yaml
  - pattern: [nn.Linear, operator.add]
    dtype_configs: [w8a8]
    claim_stage: 1               # BS549: every entry claims in stage 1
  - pattern: [nn.Conv2d, nn.BatchNorm2d, operator.add]
    dtype_configs: [w8a8]
    claim_stage: 1
```

**Fix.** Put the entries that must claim first in a lower stage than the others, or remove
the key.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.INERT_CLAIM_STAGE


def check(context: LintContext) -> Iterator[Problem]:
    entries = list(context.entries)
    staged = [entry for entry in entries if entry.model.claim_stage is not None]
    if not staged or len({entry.model.claim_stage or 0 for entry in entries}) > 1:
        return
    for entry in staged:
        yield Problem(
            (*entry.path, "claim_stage"),
            f"{entry.label}: claim_stage changes nothing: every entry of the spec claims in "
            "the same stage, so the runtime claims longest chain first, then in spec order",
            "give the entries that must claim first a lower stage, or remove the key",
        )
