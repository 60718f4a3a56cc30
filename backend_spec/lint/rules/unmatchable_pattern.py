"""**Why.** `method:NAME` matches FX `call_method` nodes, which tracing records for `Tensor`
methods; a name that is not a `torch.Tensor` attribute is most likely a typo and never matches.
Quantized module classes (`nnq.*`, `nnqr.*`, `nnqd.*`) never occur in the float and QAT models
that `prepare_fx` runs on. (torch's own backends trip this rule: see the top of this page.)

```yaml
  - pattern: method:veiw                          # BS512
  - pattern: nnq.Linear                           # BS512
```

**Fix.** Correct the method name; name the float (or QAT) module instead of a quantized one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec.lint.context import LintContext, PatternEntry, Problem
from backend_spec.lint.ops import is_quantized_module
from backend_spec.names.labels import object_label
from backend_spec.names.vocabulary import METHOD_PREFIX
from backend_spec.specfile.source import KeyPath

CODE = codes.UNMATCHABLE_PATTERN


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        model = entry.model
        value = model.pattern if model.pattern is not None else model.pattern_complex_format
        for path, name in _names(entry.pattern_path, value):
            problem = _problem(entry, path, name)
            if problem is not None:
                yield problem


def _names(path: KeyPath, value: Any) -> Iterator[tuple[KeyPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _names((*path, i), item)


def _problem(entry: PatternEntry, path: KeyPath, name: str) -> Problem | None:
    from backend_spec._torch import torch

    if name.startswith(METHOD_PREFIX):
        method = name[len(METHOD_PREFIX) :]
        if method.isidentifier() and not hasattr(torch.Tensor, method):
            return Problem(
                path,
                f"torch.Tensor has no method '{method}', so '{name}' never matches",
                "check the spelling of the method",
            )
        return None
    op = entry.name(*path[len(entry.path) :])  # as the compiler resolved it
    if is_quantized_module(op):
        return Problem(
            path,
            f"{object_label(op)} is a quantized module; prepare_fx runs on float and QAT models, "
            "which never contain it",
            "name the float (or QAT) module instead",
        )
    return None
