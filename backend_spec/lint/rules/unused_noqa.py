"""**Why.** A code in a `# noqa` comment that silences nothing is noise at best, and at worst
will silence a new finding nobody meant to hide. It is also how bespec says that a code cannot
be silenced: loader errors (schema, names, references) and the errors `compile` enforces
(`BS501`, `BS511`) are always reported, comment or not. Like ruff's `RUF100`.

```yaml
patterns:
  - pattern: nn.Linear   # noqa: BS507   <- BS521: nothing on this line is BS507
```

Codes of rules that did not run (deselected with `--select`/`--ignore`) are not reported.

**Fix.** Remove the code (or the comment), or fix the error it tried to hide.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.UNUSED_NOQA


def check(context: LintContext) -> Iterator[Problem]:
    for mention, message, hint in context.noqa.unused():
        yield Problem((), message, hint, position=mention.position)
