"""**Why.** A suppression comment that bespec does not honour silences nothing, while its
author thinks it does. A bare `# noqa` (no codes) would silence every finding of its line,
including the ones nobody has read yet, so bespec does not honour it; a file-wide
`# bespec: noqa: CODE` must be on a line of its own.

```yaml
dtype_configs:
  spare: {input_dtype: qint8, output_dtype: qint8}   # noqa   <- BS520: which code?
```

**Fix.** Name the codes: `# noqa: BS507` (several: `# noqa: BS507, BS508`), or
`# bespec: noqa: BS507` on a line of its own for the whole file.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem

CODE = codes.INVALID_NOQA


def check(context: LintContext) -> Iterator[Problem]:
    for position, message, hint in context.noqa.invalid:
        yield Problem((), message, hint, position=position)
