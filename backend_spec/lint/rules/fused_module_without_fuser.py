"""**Why.** torch fuses a pattern only if its entry has a `fuser_method`; `fused_module` alone only
tells convert which class a fusion produced. The entry describes a fusion that never happens.

```yaml
  - pattern: [nn.Conv2d, nn.ReLU]
    fused_module: nni.ConvReLU2d                  # BS503
```

**Fix.** Add `fuser_method: {sequential: nni.ConvReLU2d}` (or a fuser function).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.FUSED_MODULE_WITHOUT_FUSER


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        model = entry.model
        if model.fused_module is not None and model.fuser_method is None:
            yield Problem(
                (*entry.path, "fused_module"),
                "fused_module is set but fuser_method is not; torch never fuses this pattern",
                f"add 'fuser_method: {{sequential: {model.fused_module}}}' or a fuser function",
                at_key=True,
            )
