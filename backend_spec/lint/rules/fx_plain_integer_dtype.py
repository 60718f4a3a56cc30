"""**Why.** FX quantizes a tensor only with torch's quantized dtypes: `quint8`, `qint8`,
`qint32`. A dtype config that says `uint8` or `int8` compiles, matches and is observed by
`prepare_fx`, but `convert_fx` then leaves the op float (an activation's observer is dropped,
no quantize node is made) or stops with "Unsupported dtype and qscheme" (a weight). pt2e works
the other way round: its quantize ops take `uint8`/`int8`, and bespec's pt2e flow reads
`quint8`/`qint8` as those. So the quantized names are right in both flows, and the plain ones
only in pt2e.

```yaml
dtype_configs:
  w8a8:
    input_dtype: uint8                            # BS522: FX needs quint8
    weight_dtype: {dtype: int8, qscheme: symmetric}   # BS522: FX needs qint8
```

**Fix.** Write `quint8` for `uint8`, `qint8` for `int8` (`qint32` for `int32`): FX quantizes
with them and pt2e reads them as `uint8`/`int8`. The bias is another rule's (`BS513`).
"""

from __future__ import annotations

from collections.abc import Iterator

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.dtypes import FX_QUANTIZED_TWINS, fx_quantized_twin
from backend_spec.specfile.models import DTypeWithConstraintsModel

CODE = codes.FX_PLAIN_INTEGER_DTYPE

_PLAIN = {twin: plain for plain, twin in FX_QUANTIZED_TWINS.items()}

#: The tensors FX quantizes with a dtype config's dtype (the bias stays float: BS513).
_ROLES = {"input_dtype": "input", "output_dtype": "output", "weight_dtype": "weight"}


def check(context: LintContext) -> Iterator[Problem]:
    seen: set[object] = set()  # an anchored dtype is reported once, where it is written
    for path, model in context.dtype_definitions():
        for key, role in _ROLES.items():
            value = getattr(model, key)
            constrained = isinstance(value, DTypeWithConstraintsModel)
            name = value.dtype if constrained else value
            twin = fx_quantized_twin(name) if isinstance(name, str) else None
            if twin is None:
                continue
            where = context.doc.canonical((*path, key, "dtype") if constrained else (*path, key))
            if where in seen:
                continue
            seen.add(where)
            fails = (
                "convert_fx fails on it (Unsupported dtype and qscheme)"
                if role == "weight"
                else "convert_fx leaves the op float"
            )
            yield Problem(
                where,
                f"{key} {name}: FX quantizes with {twin}, not {name}, so {fails}; "
                f"pt2e reads {twin} as {_PLAIN[twin]}",
                f"write {twin}: FX quantizes with quint8/qint8, pt2e reads them as uint8/int8",
            )
