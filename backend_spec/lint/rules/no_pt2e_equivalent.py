"""**Why.** The same spec drives torchao's pt2e flow (`backend_spec.quantizer`). There every op
becomes the chain of ATen calls `torch.export` records for it, and some entries have none: QAT
modules (pt2e QAT fake-quantizes the float graph), recurrent modules (`aten.lstm` takes its
weights as one list), ops that export removes (`nn.Identity`, `method:contiguous`), and
complex-format patterns with `MatchAllNode`. The quantizer skips such entries (its `.report`
says so); this note makes it visible before a pt2e model runs in float. It is information, not
a problem: the FX flow is unaffected.

```yaml
patterns:
  - pattern: nn.Identity          # BS701
    dtype_configs: [default_op_quint8]
```

**Fix.** Nothing, if the entry only matters for FX. Otherwise give the entry the ATen chain it
should match (version 2): `aten: [[aten.clone.default]]`.

**Only where pt2e is in play.** A file that uses no pt2e key (`aten`, `quantize`, the version
3 to 7 entry keys, `graph_inputs`, `input_sharing`, `transform_for_annotation`; its
`extends` base counts) is taken to be
for FX: its notes come as one line that counts them and names the first few. The notes are
listed one per entry when the file uses a pt2e key, or when the rule is selected by name
(`--select BS701`, or `select` in `[tool.bespec.lint]`).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.fields import PT2E_PATTERN_FIELDS

CODE = codes.NO_PT2E_EQUIVALENT

#: The skip reason of ops without a synthesized one-op model to trace.
_NO_MODEL = "no one-op model to trace"


#: How many entries the one-line summary names.
_NAMED = 3


def check(context: LintContext) -> Iterator[Problem]:
    found = list(_skipped(context))
    if not found:
        return
    if CODE.id in context.explicit or uses_pt2e(context):
        yield from (problem for _label, problem in found)
        return
    labels = [label for label, _problem in found[:_NAMED]]
    more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    yield Problem(
        found[0][1].path,
        f"{len(found)} {'entry has' if len(found) == 1 else 'entries have'} no pt2e equivalent "
        f"({', '.join(labels)}{more}); backend_spec.quantizer skips them",
        "nothing to do for FX (the file uses no pt2e key); `--select BS701` lists each",
    )


def _skipped(context: LintContext) -> Iterator[tuple[str, Problem]]:
    """Each entry the pt2e quantizer skips: its label and its note."""
    from backend_spec.pt2e.rules import skip_reason

    for entry in context.entries:
        if entry.model.aten or (entry.ops is None and entry.key is None):
            continue
        reason = skip_reason(entry.ops, entry.key, fused=entry.model.fuser_method is not None)
        # An op bespec cannot even call (BS512's business) says nothing about pt2e.
        if reason is not None and _NO_MODEL not in reason:
            yield (
                entry.label,
                Problem(
                    entry.pattern_path,
                    f"{entry.label} has no pt2e equivalent ({reason}); "
                    "backend_spec.quantizer skips it",
                    "nothing to do for FX; for pt2e, list its ATen chain under 'aten' (version 2)",
                ),
            )


def uses_pt2e(context: LintContext) -> bool:
    """Whether the spec (its ``extends`` base included, when it compiled) sets any pt2e key."""
    if context.backend is not None:
        return context.backend.uses_pt2e
    spec = context.spec
    return (
        spec.graph_inputs is not None
        or spec.input_sharing is not None
        or spec.transform_for_annotation is not None
        or any(
            getattr(entry.model, key, None) is not None
            for entry in context.entries
            for key in PT2E_PATTERN_FIELDS
        )
    )
