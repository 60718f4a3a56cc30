"""**Why.** A named dtype config that no pattern uses is dead weight, and often a sign that a
pattern names the wrong config.

```yaml
dtype_configs:
  act_int8: {input_dtype: quint8, output_dtype: quint8}
  spare: {input_dtype: qint8, output_dtype: qint8}   # BS507
```

**Fix.** Use it or remove it. Keep shared snippets under an `x-` top-level key instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.UNUSED_DTYPE_CONFIG


def check(context: LintContext) -> Iterator[Problem]:
    used = {
        ref
        for entry in context.entries
        for ref in entry.model.dtype_configs
        if isinstance(ref, str)
    }
    for name in context.spec.dtype_configs:
        if name not in used:
            yield Problem(
                ("dtype_configs", name),
                f"dtype config '{name}' is not used by any pattern",
                "use it in a pattern's dtype_configs, or remove it",
                at_key=True,
            )
