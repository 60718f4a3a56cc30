"""**Why.** In the pt2e flow each entry becomes a rule on a chain of ATen ops, and ATen forgets
some distinctions Python code makes: `operator.add` and `x.add(y)` are both `aten.add.Tensor`
written as the same method, and `aten` chains (version 2) match however a node was written.
When two entries land on the same chain and provenance with different configs (dtype configs,
observation type, `quantize`), the pt2e quantizer can only apply the first; the FX flow may
still tell them apart, so the two flows quantize such nodes differently.

```yaml
spec_version: 2
patterns:
  - pattern: nn.ReLU
    aten: [[aten.hardtanh.default]]
    dtype_configs: [default_op_quint8]
  - pattern: nn.Hardtanh                         # BS702
    aten: [[aten.hardtanh.default]]
    observation_type: output_share_observer_with_input
    dtype_configs: [default_op_quint8]
```

**Fix.** Give both entries the same config, or drop the `aten` chain of one of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.ATEN_CHAIN_CONFLICT


def check(context: LintContext) -> Iterator[Problem]:
    from backend_spec.pt2e.rules import chain_conflicts, ops_label

    if context.backend is None:
        return
    by_label = {ops_label(e.ops): e for e in context.entries if e.ops is not None}
    for label, first, chain in chain_conflicts(context.backend):
        entry = by_label.get(label)
        if entry is None:  # the later entry comes from the extends base
            continue
        yield Problem(
            entry.pattern_path,
            f"{label} and {first} both become the ATen chain {chain} with different "
            f"configs; the pt2e quantizer applies only {first}'s",
            "give both entries the same config, or drop one entry's 'aten' chain",
        )
