"""**Why.** `BackendConfig` stores entries by pattern; a later entry with the same pattern
replaces the earlier one without a word, so the earlier entry has no effect. Names are compared
after resolution: `nn.Conv2d` and `torch.nn.modules.conv.Conv2d` are the same op, and a
`pattern_complex_format` equal to a forward `pattern` is the same pattern. Overriding a pattern
of the `extends` base is how `extends` works and is not reported.

```yaml
patterns:
  - pattern: nn.ReLU                              # BS501: given again at line 4
    dtype_configs: [act_int8]
  - pattern: torch.nn.modules.activation.ReLU
```

**Fix.** Merge the entries into one (usually the first was meant to be edited, not copied).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, PatternEntry, Problem

CODE = codes.DUPLICATE_PATTERN


def check(context: LintContext) -> Iterator[Problem]:
    groups: dict[object, list[PatternEntry]] = {}
    for entry in context.entries:
        if entry.key is not None:
            groups.setdefault(entry.key, []).append(entry)
    for entries in groups.values():
        last = entries[-1]
        line = context.doc.where(last.path)[0]
        for entry in entries[:-1]:
            same_text = entry.model.pattern == last.model.pattern and (
                entry.model.pattern_complex_format == last.model.pattern_complex_format
            )
            how = "" if same_text else " (the same ops under other names)"
            yield Problem(
                entry.pattern_path,
                f"pattern {entry.label} is given again at line {line}{how}; "
                "BackendConfig keeps only the last entry, so this one has no effect",
                "merge the two entries into one",
            )
