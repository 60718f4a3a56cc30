"""**Why.** `ptq_fake_quant: true` (version 6) makes PTQ observe with the mapping's
fake-quantize, the kind `fake_quant` names (a config of fake-quantizes given to
`prepare_pt2e`, Core ML's). `fake_quant: observer` (version 10) says the mapping has no
fake-quantize: QAT observes with the observer itself (torchao's EmbeddingQuantizer's weight
beside a QAT config). Together they contradict each other: PTQ observes with the plain
observer either way, so whichever was meant, one of the two keys is a mistake.

```yaml
    weight_dtype: {dtype: qint8, fake_quant: observer, ptq_fake_quant: true}   # BS550
```

**Fix.** Remove `ptq_fake_quant`, or name the fake-quantize kind PTQ should observe with
(`fake_quant: fake_quantize`).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.specfile.fields import OBSERVER_IN_QAT
from backend_spec.specfile.models import DTypeWithConstraintsModel

CODE = codes.PTQ_FAKE_QUANT_WITHOUT_ONE

_ROLES = ("input_dtype", "output_dtype", "weight_dtype")


def check(context: LintContext) -> Iterator[Problem]:
    for path, model in context.dtype_definitions():
        for role in _ROLES:
            value = getattr(model, role)
            if (
                isinstance(value, DTypeWithConstraintsModel)
                and value.ptq_fake_quant
                and value.fake_quant == OBSERVER_IN_QAT
            ):
                yield Problem(
                    (*path, role, "ptq_fake_quant"),
                    f"{role}: ptq_fake_quant asks PTQ to observe with the fake-quantize, and "
                    "fake_quant: observer says there is none: PTQ observes with the observer",
                    "remove ptq_fake_quant, or name a fake-quantize kind in fake_quant",
                )
