"""**Why.** torch calls a fuser as `fuser(is_qat, m1, m2[, m3])`, one module per op of the pattern
in forward order. A fuser with another signature fails with a `TypeError` in the middle of
`prepare_fx`. `{sequential: X}` fusers always fit; `pattern_complex_format` entries are not
checked.

```yaml
  - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
    fused_module: nni.ConvBnReLU2d
    fuser_method: fuse_conv_bn                    # BS511: takes (is_qat, conv, bn)
```

**Fix.** Use the fuser for that many ops (`fuse_conv_bn_relu`) or `{sequential: X}`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.resolver import Kind

CODE = codes.FUSER_ARITY


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        fuser_name = entry.model.fuser_method
        if not isinstance(fuser_name, str) or entry.ops is None:
            continue
        fuser = context.lookup(fuser_name, Kind.FUNCTION)
        try:
            signature = inspect.signature(fuser)
        except (TypeError, ValueError):  # a builtin without a signature: cannot tell
            continue
        arity = len(entry.ops)
        try:
            signature.bind(False, *([None] * arity))
        except TypeError:
            yield Problem(
                (*entry.path, "fuser_method"),
                f"fuser {fuser_name}{signature} cannot be called with is_qat and {arity} "
                f"module{'s' if arity != 1 else ''}, one per op of the pattern",
                "use a fuser for this many ops, or {sequential: FusedModuleClass}",
            )
