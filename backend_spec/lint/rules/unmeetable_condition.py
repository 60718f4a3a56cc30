"""**Why.** A `when` condition (version 7) lets an entry match only where its ops were called
with given arguments (`when: {min_val: 0.0}`: conv + hardtanh fused only as a ReLU6-like
clamp). The pt2e flow reads the arguments by the names of the ATen ops' schemas, so a
condition on an argument that no op of the pattern has (a typo, the Python keyword instead of
the schema's name, an argument of another op), or a value of another type than the argument
(`min_val: zero`, `inplace: 1`), is never met: the entry never matches, and its nodes go to
other entries or stay float, without a word.

```yaml
  - pattern: [nn.Conv2d, nn.Hardtanh]
    dtype_configs: [w8a8]
    when: {min_value: 0.0}        # BS545: hardtanh's argument is min_val
```

**Fix.** Name an argument of one of the pattern's ATen ops (`bespec explain --flow pt2e`
shows the chain; `torch.ops.aten.hardtanh.default._schema` its arguments), with a value of its
type: a number for float, int and Scalar arguments, true or false for bool ones, a string for
str ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec.diagnostics import close_matches
from backend_spec.lint.context import LintContext, Problem

CODE = codes.UNMEETABLE_CONDITION

#: Schema argument types -> the Python types a ``when`` value of them may have.
_VALUE_TYPES = {
    "float": (int, float),
    "int": (int,),
    "SymInt": (int,),
    "Scalar": (int, float),
    "number": (int, float),
    "bool": (bool,),
    "str": (str,),
}


def check(context: LintContext) -> Iterator[Problem]:
    for entry in context.entries:
        when = entry.model.when
        if not when:
            continue
        arguments = _arguments(entry)
        if arguments is None:  # no ATen chain: BS701's business
            continue
        for name, value in when.items():
            problem = _problem(name, value, arguments)
            if problem is not None:
                message, fix = problem
                yield Problem((*entry.path, "when", name), f"{entry.label}: {message}", fix)


def _problem(name: str, value: Any, arguments: dict[str, set[str]]) -> tuple[str, str] | None:
    """What is wrong with the condition ``name: value``, and its fix; None when it can hold."""
    ops = ", ".join(sorted(arguments[""]))
    if not name or name not in arguments:
        match = close_matches(name, sorted(a for a in arguments if a), n=1)
        fix = f"did you mean '{match[0]}'?" if match else "name an argument of " + ops
        return f"no ATen op of its pattern ({ops}) has an argument {name}", fix
    types = arguments[name]
    allowed = tuple(t for kind in types for t in _VALUE_TYPES.get(kind.rstrip("?"), (object,)))
    fits = isinstance(value, allowed) and (isinstance(value, bool) == (bool in allowed))
    if fits:
        return None
    kinds = " or ".join(sorted(types))
    return (
        f"{name} is a {kinds} argument, which is never {value!r}",
        f"write a value of its type ({kinds})",
    )


def _arguments(entry: Any) -> dict[str, set[str]] | None:
    """Argument name -> its schema types over every op of the entry's ATen chains (the traced
    one and its ``aten`` ones); the key ``""`` holds the ops' names. None without a chain."""
    from backend_spec.pt2e.aten import describe_op

    targets: list[str] = []
    if entry.ops is not None:
        for op in entry.ops:
            chain = describe_op(op).get("chain") or []
            targets += [target for alternatives in chain for target in alternatives]
    for chain in entry.model.aten or ():
        for op in chain:
            targets += [op] if isinstance(op, str) else list(op)
    found: dict[str, set[str]] = {"": set()}
    for target in dict.fromkeys(targets):
        schema = _schema(target)
        if schema is None:
            continue
        found[""].add(target)
        for argument in schema.arguments:
            found.setdefault(argument.name, set()).add(str(argument.type))
            if str(argument.type).startswith("Tensor"):  # version 8: its size along a dim
                for dim in range(8):
                    found.setdefault(f"{argument.name}.shape.{dim}", set()).add("int")
    return found if found[""] else None


def _schema(target: str) -> Any:
    """The schema of an ATen overload named ``aten.<op>.<overload>``, or None."""
    from backend_spec.names.resolver import NameProblem, aten_overload

    if target.count(".") != 2 or not target.startswith("aten."):
        return None
    try:
        return aten_overload(target)._schema
    except (NameProblem, AttributeError, RuntimeError):
        return None
