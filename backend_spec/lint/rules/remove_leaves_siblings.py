"""**Why.** `remove` takes out exactly the patterns it names. A backend that lacks an op usually
lacks its other forms too, but those stay: removing `nn.ConvTranspose2d` from a base leaves
`F.conv_transpose2d` and the ConvTranspose + BatchNorm fusions in the backend, so models that
use them are still quantized (or fused) for an op the hardware does not have.

```yaml
extends: fbgemm
remove: [nn.ConvTranspose2d]     # BS515: leaves F.conv_transpose2d, (nn.ConvTranspose2d, ...)
```

**Fix.** Remove the functional form and the chains too, or keep the op if only one form is
unsupported (then this warning can be ignored for the file).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec.ir import Entry
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.labels import object_label, patterns_label

CODE = codes.REMOVE_LEAVES_SIBLINGS

_SHOWN = 4


def _twin_name(op: Any) -> str:
    """``nn.ConvTranspose2d``, ``F.conv_transpose2d`` (``method:relu_``...) share this key."""
    name = op if isinstance(op, str) else getattr(op, "__name__", "")
    return str(name).lower().replace("_", "")


def _leaves(pattern: Any) -> list[Any]:
    if isinstance(pattern, tuple):
        return [leaf for part in pattern for leaf in _leaves(part)]
    return [pattern]


def _siblings(removed: Any, entries: tuple[Entry, ...]) -> list[str]:
    """Patterns left in the backend that hold another form of ``removed`` or chain it."""
    twin = _twin_name(removed)
    found = []
    for entry in entries:
        complex_format = entry.get("pattern_complex_format")
        leaves = _leaves(entry.pattern if entry.pattern is not None else complex_format)
        chained = len(leaves) > 1 and any(leaf is removed for leaf in leaves)
        other_form = any(leaf is not removed and _twin_name(leaf) == twin for leaf in leaves)
        if twin and (chained or other_form):
            found.append(patterns_label(entry.pattern, complex_format))
    return found


def check(context: LintContext) -> Iterator[Problem]:
    if context.backend is None:
        return
    for i, ref in enumerate(context.spec.remove):
        if not isinstance(ref, str):
            continue
        removed = context.name("remove", i)
        if removed is None:
            continue
        left = _siblings(removed, context.backend.entries)
        if left:
            shown = ", ".join(left[:_SHOWN]) + (
                f" and {len(left) - _SHOWN} more" if len(left) > _SHOWN else ""
            )
            yield Problem(
                ("remove", i),
                f"removing {object_label(removed)} leaves {shown} in the backend",
                "remove those patterns too, unless the backend supports them",
            )
