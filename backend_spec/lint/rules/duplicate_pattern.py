"""A pattern is given more than once, so all but its last entry are silently dropped.

BackendConfig stores pattern entries by pattern: a second entry with the same pattern replaces
the first without a word. Names are compared after resolution, so ``nn.Conv2d`` and
``torch.nn.modules.conv.Conv2d`` are the same pattern. (An entry that replaces a pattern
of the ``extends`` base is the documented way to override it and is not reported.)
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec.lint.context import LintContext, PatternEntry, Problem
from backend_spec.names.labels import entry_label

ID = "BS501"
NAME = "duplicate-pattern"
SEVERITY = "error"


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
                f"pattern {entry_label(entry)} is given again at line {line}{how}; "
                "BackendConfig keeps only the last entry, so this one has no effect",
                "merge the two entries into one",
            )
