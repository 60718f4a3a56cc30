"""**Why.** The same spec drives torchao's pt2e flow (`backend_spec.quantizer`). There every op
becomes the chain of ATen calls `torch.export` records for it, and some entries have none: QAT
modules (pt2e QAT fake-quantizes the float graph), recurrent modules (`aten.lstm` takes its
weights as one list), ops that export removes (`nn.Identity`, `method:contiguous`), and
complex-format patterns with `MatchAllNode`. The quantizer skips such entries (its `.report`
says so); this note makes it visible before a pt2e model runs in float. It is information, not
a problem: the FX flow is unaffected.

```yaml
patterns:
  - pattern: nn.Identity          # BS701
    dtype_configs: [default_op_quint8]
```

**Fix.** Nothing, if the entry only matters for FX. Otherwise give the entry the ATen chain it
should match (version 2): `aten: [[aten.clone.default]]`.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.NO_PT2E_EQUIVALENT

#: The skip reason of ops without a synthesized one-op model to trace.
_NO_MODEL = "no one-op model to trace"


def check(context: LintContext) -> Iterator[Problem]:
    from backend_spec.pt2e.rules import skip_reason

    for entry in context.entries:
        if entry.model.aten or (entry.ops is None and entry.key is None):
            continue
        reason = skip_reason(entry.ops, entry.key)
        # An op bespec cannot even call (BS512's business) says nothing about pt2e.
        if reason is not None and _NO_MODEL not in reason:
            yield Problem(
                entry.pattern_path,
                f"{entry.label} has no pt2e equivalent ({reason}); backend_spec.quantizer skips it",
                "nothing to do for FX; for pt2e, list its ATen chain under 'aten' (version 2)",
            )
