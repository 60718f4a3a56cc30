"""**Why.** A named dtype config that no pattern uses is dead weight, and often a sign that a
pattern names the wrong config.

```yaml
dtype_configs:
  act_int8: {input_dtype: quint8, output_dtype: quint8}
  spare: {input_dtype: qint8, output_dtype: qint8}   # BS507
```

A config named by `graph_inputs` (version 5) is used.

**Fix.** Use it or remove it. Keep shared snippets under an `x-` top-level key instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.UNUSED_DTYPE_CONFIG


def check(context: LintContext) -> Iterator[Problem]:
    # Read from the data as written, so that configs and entries that failed validation
    # (reported by the loader) neither hide nor fake a finding.
    data = context.doc.data if isinstance(context.doc.data, dict) else {}
    entries = data.get("patterns") if isinstance(data.get("patterns"), list) else []
    used = {
        ref
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("dtype_configs"), list)
        for ref in entry["dtype_configs"]
        if isinstance(ref, str)
    }
    if isinstance(data.get("graph_inputs"), str):  # version 5: the graph inputs' config
        used.add(data["graph_inputs"])
    defined = data.get("dtype_configs") if isinstance(data.get("dtype_configs"), dict) else {}
    for name in defined:
        if (
            isinstance(name, str)
            and name not in used
            and not context.spec.set_aside(("dtype_configs", name))
        ):  # one set aside (a key dedented out of a config) is the loader's to report
            yield Problem(
                ("dtype_configs", name),
                f"dtype config '{name}' is not used by any pattern",
                "use it in a pattern's dtype_configs, or remove it",
                at_key=True,
            )
