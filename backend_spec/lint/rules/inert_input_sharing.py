"""**Why.** A pattern entry's `input_sharing` (version 12) says when that entry's inputs
reuse the observer of their producer's output, in place of the spec-wide `input_sharing`
(version 5; `dtype` when unset). Set to the spec-wide rule (`spec`, or the same value), it
changes nothing. Nor does it on an entry with `input_observer: upstream_only` and one
input: that input never has an observer of its own, so there is nothing to share or not.

```yaml
input_sharing: qspec
patterns:
  - pattern: torch.add
    dtype_configs: [act]
    input_sharing: qspec       # BS552: the spec-wide rule says so already
```

**Fix.** Remove the key, or set the other value where the entry reads its producers
otherwise than the rest of the spec.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.INERT_INPUT_SHARING


def check(context: LintContext) -> Iterator[Problem]:
    backend = context.backend
    spec_wide = backend.input_sharing if backend is not None else context.spec.input_sharing
    spec_wide = spec_wide or "dtype"
    for entry in context.entries:
        sharing = entry.model.input_sharing
        if sharing is None:
            continue
        borrowed = entry.model.input_observer == "upstream_only" and entry.single is not None
        if sharing in ("spec", spec_wide):
            why = f"the spec-wide rule is {spec_wide} already"
        elif borrowed:
            why = "its input_observer: upstream_only gives its input no observer of its own"
        else:
            continue
        yield Problem(
            (*entry.path, "input_sharing"),
            f"{entry.label}: input_sharing: {sharing} changes nothing: {why}",
            "remove the key, or set it where the entry reads its producers otherwise",
        )
