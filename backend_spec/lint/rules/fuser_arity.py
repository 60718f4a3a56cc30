"""The fuser function does not take one module per op of the pattern.

torch calls a fuser as ``fuser(is_qat, m1, m2[, m3])``, one argument per op of the pattern in
forward order. A fuser with another signature fails with a TypeError in the middle of
``prepare_fx``. ``{sequential: X}`` fusers always fit. Complex-format patterns are not
checked, since their fuser's arguments depend on how the nested pattern is written.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.resolver import Kind

ID = "BS511"
NAME = "fuser-arity"
SEVERITY = "error"


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
