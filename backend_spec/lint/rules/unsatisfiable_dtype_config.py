"""**Why.** prepare applies a dtype config only when the QConfig's observers give exactly its
dtypes (`_is_pattern_dtype_config_and_qconfig_supported_by_backend`), and a QConfig has one
activation observer: it gives a static op's input and its output the same dtype. So a static
config whose `input_dtype` and `output_dtype` differ (`quint8` in, `float` out) matches no
QConfig at all, and a dynamic one (`is_dynamic: true`) whose output is not `float` never
matches either, since a dynamic QConfig leaves the output float. Either way torch skips the
config without a word, and the ops it was written for stay float in both FX and pt2e. (Since
version 8 a dynamic config whose output is its input's dtype means something in pt2e: on an
`output_share_observer_with_input` entry the output shares the input's dynamic observer, as
X86's dynamic config quantizes pools and cat. A version 8 file is not warned about it.)

```yaml
patterns:
  - pattern: nn.Linear
    dtype_configs:
      - {input_dtype: quint8, output_dtype: float, weight_dtype: qint8}   # BS516
```

**Fix.** Give a static config the same input and output dtype; for a float output with
quantized input, write `is_dynamic: true` (dynamic quantization), which is what such a
config usually means.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec import codes
from backend_spec.lint.context import LintContext, Problem
from backend_spec.names.dtypes import dtype_name, dtype_names, to_dtype
from backend_spec.specfile.models import DTypeConfigModel, dynamic_output

CODE = codes.UNSATISFIABLE_DTYPE_CONFIG


def _dtype(value: Any) -> Any:
    """The torch dtype a config field names (``float`` and ``float32`` alike), or None."""
    name = value if isinstance(value, str) else getattr(value, "dtype", None)
    return to_dtype(name) if isinstance(name, str) and name in dtype_names() else None


def _dynamic_share(model: DTypeConfigModel) -> bool:
    """A dynamic config whose output is its input's quantized dtype (version 8)."""
    given = _dtype(model.input_dtype)
    return dynamic_output(model.is_dynamic, model.output_dtype) and given == _dtype(
        model.output_dtype
    )


def _why(model: DTypeConfigModel) -> tuple[str, str] | None:
    """Why no QConfig satisfies ``model`` and how to fix it, or None when one can."""
    from backend_spec._torch import torch

    given, out = _dtype(model.input_dtype), _dtype(model.output_dtype)
    if out is None:
        return None
    if model.is_dynamic:
        if out == torch.float32:
            return None
        return (
            f"dynamic config with output_dtype {dtype_name(out)} never matches: a dynamic "
            "QConfig leaves the output float, so torch always skips it",
            "write output_dtype: float, or leave it out",
        )
    if given is None or given == out:
        return None
    kind = "float output with quantized input" if out.is_floating_point else "mixed dtypes"
    return (
        f"static config with input_dtype {dtype_name(given)} and output_dtype {dtype_name(out)} "
        f"never matches ({kind}): a QConfig's one activation observer gives the input and the "
        "output the same dtype, so torch always skips it and the op stays float",
        "for a float output write is_dynamic: true (dynamic quantization); else make "
        f"output_dtype {dtype_name(given)}",
    )


def check(context: LintContext) -> Iterator[Problem]:
    for path, model in context.dtype_definitions():
        if context.spec.spec_version >= 8 and _dynamic_share(model):
            continue  # version 8's dynamic propagation (pt2e)
        found = _why(model)
        if found is not None:
            yield Problem(context.doc.canonical((*path, "output_dtype")), *found)
