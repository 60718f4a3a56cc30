"""**Why.** convert replaces an observed weighted module (linear, conv, transposed conv, embedding,
RNN) by the reference quantized module its root module maps to. torch builds that map from
every entry that sets both `root_module` and `reference_quantized_module`, over the whole
backend (base included). A weighted root module that no entry maps cannot be converted.

```yaml
  - pattern: nn.Conv2d
    root_module: nn.Conv2d                        # BS505
    qat_module: nnqat.Conv2d
```

**Fix.** Add `reference_quantized_module: nnqr.Conv2d` (once per root module is enough).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.lint.ops import is_weighted_module
from backend_spec.names.labels import object_label

CODE = codes.MISSING_REFERENCE_MODULE


def check(context: LintContext) -> Iterator[Problem]:
    reported: set[type] = set()
    for entry in context.entries:
        root = entry.name("root_module")
        if root is None or not is_weighted_module(root) or root in context.reference_roots:
            continue
        if root in reported:
            continue
        reported.add(root)
        yield Problem(
            (*entry.path, "root_module"),
            f"weighted root module {object_label(root)} has no reference_quantized_module "
            "in any pattern; convert cannot build a reference quantized model for it",
            _hint(root),
        )


def _hint(root: type) -> str:
    from backend_spec._torch import torch

    if hasattr(torch.ao.nn.quantized.reference, root.__name__):
        return f"add 'reference_quantized_module: nnqr.{root.__name__}'"
    return "add reference_quantized_module to an entry with this root_module"
