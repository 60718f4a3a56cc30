"""**Why.** A dtype config's `input_dtype` and `output_dtype` may both set observer options,
different ones, for one dtype (one that sets none takes the other's): Core ML observes a conv +
relu's input symmetric and its relu output affine (scale max/255, zero point 0). pt2e annotates
each edge with its own qspec, so from version 9 on the spec's pt2e quantizer observes the output
with the output mapping's options. FX cannot: a QConfig has one activation observer, used for a
node's inputs and its output, so `qconfig_mapping` (and `prepare_fx`) observe both with the
input mapping's options. Before version 9, pt2e did as FX does, and the output mapping's options
had no effect.

```yaml
spec_version: 9
dtype_configs:
  relu_out:
    input_dtype: {dtype: quint8, qscheme: symmetric}
    output_dtype: {dtype: quint8, qscheme: affine}    # BS703
```

**Fix.** Nothing, when the spec is for pt2e: the note says that FX observes this output
otherwise. Before version 9, set `spec_version: 9` for pt2e to honour the output's options,
or write the input's options on the output too.
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.models import own_output

CODE = codes.OUTPUT_OBSERVER_BY_FLOW


def check(context: LintContext) -> Iterator[Problem]:
    honoured = context.spec.spec_version >= 9
    for path, model in context.dtype_definitions():
        written = [_written(getattr(model, role)) for role in ("input_dtype", "output_dtype")]
        if not own_output(model.is_dynamic, *written):
            continue
        where = context.doc.canonical((*path, "output_dtype"))
        if honoured:
            yield Problem(
                where,
                "the output mapping's observer options differ from the input's: pt2e observes "
                "each edge with its own, FX both with one (a QConfig has one activation observer)",
                "nothing to do for pt2e; FX cannot observe the two otherwise",
            )
        else:
            yield Problem(
                where,
                "the output mapping's observer options differ from the input's, but before "
                "version 9 both flows observe input and output with one observer (the input's "
                "options, or the output's when the input sets none)",
                "set spec_version: 9 for pt2e to observe each with its own, or make them equal",
            )


def _written(mapping: object) -> object:
    """A mapping as :func:`own_output` reads it: a name, or its keys that are set."""
    dump = getattr(mapping, "model_dump", None)
    return mapping if dump is None else dump(exclude_none=True)
