"""**Why.** convert recognises fused modules by the classes that entries name in `fused_module`.
A `{sequential: X}` fuser builds `X`; if the entry names another class, or none, convert does
not know the fused module it has to lower. Only `{sequential: X}` fusers are checked: what a
fuser function returns is known only when it runs (torch's `fuse_convtranspose_bn` returns a
plain transposed conv and rightly names no fused module).

```yaml
  - pattern: [nn.Conv2d, nn.ReLU]
    fused_module: nni.ConvBn2d
    fuser_method: {sequential: nni.ConvReLU2d}    # BS504
```

**Fix.** Make `fused_module` the class the fuser builds.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.labels import object_label
from backend_spec.specfile.models import FunctionForm

CODE = codes.FUSER_FUSED_MODULE_MISMATCH


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        fuser = entry.model.fuser_method
        if not isinstance(fuser, FunctionForm) or fuser.sequential is None:
            continue
        built = entry.name("fuser_method", "sequential")
        if built is None:
            continue
        path = (*entry.path, "fuser_method", "sequential")
        if entry.model.fused_module is None:
            yield Problem(
                path,
                f"the fuser builds {object_label(built)}, but the entry has no fused_module",
                f"add 'fused_module: {fuser.sequential}'",
            )
            continue
        named = entry.name("fused_module")
        if named is not None and named is not built:
            yield Problem(
                path,
                f"the fuser builds {object_label(built)}, "
                f"but fused_module is {object_label(named)}",
                "make them the same class",
            )
