"""A DTypeConfig of the intermediate form read back as the spec mapping that builds it.

The compiler's inverse for dtype configs: ``export`` writes these mappings into specs and
``check`` records them in goldens, so both read them from here, below either of them.
"""

from __future__ import annotations

from typing import Any

from backend_spec.ir import DTypeConfig, DTypeMapping
from backend_spec.names.dtypes import dtype_name
from backend_spec.specfile.fields import DTYPE_CONFIG_MAPPINGS

DTypeDoc = dict[str, Any]


def constraints_doc(mapping: DTypeMapping) -> str | dict[str, Any] | None:
    """A bare dtype name when only ``dtype`` is set, else a mapping of the set fields."""
    extra = dict(mapping.options)  # torch's constraints, then the observer options
    if not extra:
        return None if mapping.dtype is None else dtype_name(mapping.dtype)
    if mapping.dtype is None:
        raise ValueError(f"constraints {extra} without a dtype cannot be written in a spec")
    return {"dtype": dtype_name(mapping.dtype), **extra}


def dtype_config_doc(dc: DTypeConfig) -> DTypeDoc:
    """The spec mapping of one DTypeConfig: only the fields that are set."""
    doc: DTypeDoc = {}
    for key in DTYPE_CONFIG_MAPPINGS:
        value = constraints_doc(dc.mapping(key))
        if value is not None:
            doc[key] = value
    if dc.bias_dtype is not None:
        doc["bias_dtype"] = dtype_name(dc.bias_dtype)
    if dc.is_dynamic is not None:
        doc["is_dynamic"] = dc.is_dynamic
    return doc
