"""A ``{sequential: X}`` fuser builds a class that ``fused_module`` does not name.

convert recognises fused modules by the classes the backend lists as ``fused_module``; a
fusion that builds ``X`` while the entry names another class (or none) leaves convert unaware
of the fused module it must lower. Only ``{sequential: X}`` fusers are checked, since what a
fuser function returns is known only when it runs (torch's own ``fuse_convtranspose_bn``
returns a plain transposed conv and rightly names no fused module).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.labels import name_of
from backend_spec.spec.models import SequentialFuser

ID = "BS504"
NAME = "fuser-fused-module-mismatch"
SEVERITY = "warning"


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        fuser = entry.model.fuser_method
        if not isinstance(fuser, SequentialFuser):
            continue
        built = context.module(fuser.sequential)
        if built is None:
            continue
        path = (*entry.path, "fuser_method", "sequential")
        if entry.model.fused_module is None:
            yield Problem(
                path,
                f"the fuser builds {name_of(built)}, but the entry has no fused_module",
                f"add 'fused_module: {fuser.sequential}'",
            )
            continue
        named = context.module(entry.model.fused_module)
        if named is not None and named is not built:
            yield Problem(
                path,
                f"the fuser builds {name_of(built)}, but fused_module is {name_of(named)}",
                "make them the same class",
            )
