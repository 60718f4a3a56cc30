"""Export stage 2: DTypeConfigs as spec mappings, hoisted under stable, meaningful names.

torch's built-in backends reuse a handful of DTypeConfigs (``weighted_op_quint8``,
``default_dynamic_int8``, ...) across hundreds of patterns. Hoisting identical ones into the
top-level ``dtype_configs`` table keeps an exported spec readable, and giving them torch's own
variable names lets a reader match the spec against torch's sources. Names depend only on the
dtype contents (and, for unknown configs, on first appearance), never on ids or set order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from backend_spec._torch import DTypeConfig, DTypeWithConstraints, torch
from backend_spec.compiler.described import DTypeDoc, dtype_config_doc
from backend_spec.ir import DTypeConfig as Facts
from backend_spec.ir.lift import lift_dtype_config


def _signature(doc: DTypeDoc) -> str:
    """Identity of a DTypeConfig as written: equal text means interchangeable configs.

    JSON keeps ``0`` and ``0.0`` apart, so hoisting never merges configs the file would
    spell differently.
    """
    return json.dumps(doc, sort_keys=True)


def _known_configs() -> dict[str, DTypeConfig]:
    """torch's DTypeConfigs, named as torch's sources name them (``_dtype_config`` dropped).

    The shared ones keep their ``native.py`` names; backend-specific ones keep their backend
    prefix (``qnnpack_...``, ``executorch_...``, ``onednn_...``) so the origin is visible.
    """
    q8, qi8, f16, f32 = torch.quint8, torch.qint8, torch.float16, torch.float
    act_sym = DTypeWithConstraints(dtype=qi8, scale_min_lower_bound=2**-12)
    weight_sym = DTypeWithConstraints(
        dtype=qi8,
        quant_min_lower_bound=-127,
        quant_max_upper_bound=127,
        scale_min_lower_bound=2**-12,
    )
    return {
        "weighted_op_quint8": DTypeConfig(q8, q8, qi8, f32),
        "default_op_quint8": DTypeConfig(q8, q8),
        "default_op_fp16": DTypeConfig(f16, f16, f16, f16),
        "default_dynamic_int8": DTypeConfig(q8, f32, qi8, f32, is_dynamic=True),
        "default_dynamic_float16": DTypeConfig(f16, f32, f16, f32, is_dynamic=True),
        "input_output_only_quint8": DTypeConfig(q8, q8, f32, f32),
        "weight_only_quint8": DTypeConfig(f32, f32, q8),
        "weight_only_quint4x2": DTypeConfig(f32, f32, torch.quint4x2),
        "onednn_weight_only_qint8": DTypeConfig(f32, f32, qi8),
        "qnnpack_weighted_op_qint8_symmetric": DTypeConfig(act_sym, act_sym, weight_sym, f32),
        "qnnpack_default_op_qint8_symmetric": DTypeConfig(act_sym, act_sym),
        "executorch_default_dynamic_qint8": DTypeConfig(
            act_sym, f32, weight_sym, f32, is_dynamic=True
        ),
        # tensorrt.py defines these two inside get_tensorrt_backend_config().
        "weighted_op_qint8": DTypeConfig(qi8, qi8, qi8, f32),
        "non_weighted_op_qint8": DTypeConfig(qi8, qi8),
    }


def _fixed_qparams_variants(known: dict[str, DTypeConfig]) -> dict[str, DTypeConfig]:
    """The configs torch derives for fixed-qparams ops (sigmoid, tanh, ...), named
    ``<base>_fixed_qparams_0to1`` / ``<base>_fixed_qparams_neg1to1``.

    They are computed with torch's own helper so that the names track torch's constraints.
    """
    from torch.ao.quantization.backend_config import _common_operator_config_utils as common

    add_constraints = getattr(common, "_add_fixed_qparams_to_dtype_configs", None)
    ranges = {
        "0to1": getattr(common, "_FIXED_QPARAM_OP_0TO1_CONSTRAINTS", None),
        "neg1to1": getattr(common, "_FIXED_QPARAM_OP_NEG1TO1_CONSTRAINTS", None),
    }
    variants: dict[str, DTypeConfig] = {}
    if add_constraints is None:
        return variants
    for base_name, base in known.items():
        for range_name, constraints in ranges.items():
            if constraints is None:
                continue
            try:
                (variant,) = add_constraints([base], constraints)
            except ValueError:  # scale bounds set: torch refuses these bases
                continue
            if variant != base:
                variants[f"{base_name}_fixed_qparams_{range_name}"] = variant
    return variants


def _known_names() -> dict[str, str]:
    """Signature -> torch name, for every known config and its fixed-qparams variants."""
    known = _known_configs()
    names: dict[str, str] = {}
    for name, dc in {**known, **_fixed_qparams_variants(known)}.items():
        names.setdefault(_signature(dtype_config_doc(lift_dtype_config(dc))), name)
    return names


#: Short forms of the constraint fields, for names that spell constraints out.
_CONSTRAINT_ABBREVIATIONS: dict[str, str] = {
    "quant_min_lower_bound": "qmin",
    "quant_max_upper_bound": "qmax",
    "scale_min_lower_bound": "smin",
    "scale_max_upper_bound": "smax",
    "scale_exact_match": "scale",
    "zero_point_exact_match": "zp",
}


def _number_text(value: Any) -> str:
    """A number as a name part: ``-50`` -> ``m50``, ``0.5`` -> ``0p5``, ``1e-05`` -> ``1em05``."""
    return repr(value).replace("-", "m").replace(".", "p").replace("+", "")


def derived_name(doc: DTypeDoc, detailed: bool = False) -> str:
    """A descriptive name for a config torch does not define, from its dtypes.

    ``{input_dtype: quint8, output_dtype: float, weight_dtype: qint8, is_dynamic: true}``
    becomes ``in_quint8_out_float_w_qint8_dynamic``; ``_constrained`` marks constraints, or
    with ``detailed`` each constraint is spelled out (``in_qint8_qmin_m50``), which tells
    apart configs that differ only in their constraints.
    """
    parts: list[str] = []
    for key, short in (("input_dtype", "in"), ("output_dtype", "out"), ("weight_dtype", "w")):
        value = doc.get(key)
        if value is not None:
            dtype = value.get("dtype", "any") if isinstance(value, dict) else value
            parts.append(f"{short}_{dtype}")
            if detailed and isinstance(value, dict):
                parts += [
                    f"{_CONSTRAINT_ABBREVIATIONS[field]}_{_number_text(number)}"
                    for field, number in value.items()
                    if field in _CONSTRAINT_ABBREVIATIONS
                ]
    if "bias_dtype" in doc:
        parts.append(f"b_{doc['bias_dtype']}")
    if doc.get("is_dynamic") is not None:
        parts.append("dynamic" if doc["is_dynamic"] else "static")
    if not detailed and any(isinstance(v, dict) for v in doc.values()):
        parts.append("constrained")
    return "_".join(parts) or "unconstrained"


class DTypeConfigTable:
    """Assigns each distinct DTypeConfig one name, in first-appearance order.

    With ``spec_names`` a config that has the spec's name for it keeps that name (a config
    written twice under two names stays two configs): what ``compile -o`` writes for a spec.
    """

    def __init__(self, *, spec_names: bool = False) -> None:
        self._known = _known_names()
        self._spec_names = spec_names
        self._by_signature: dict[tuple[str | None, str], str] = {}
        self.docs: dict[str, DTypeDoc] = {}

    def name_of(self, dc: Facts) -> str:
        """The name under which ``dc`` (of the intermediate form, version 2 options included)
        is hoisted (registering it on first sight)."""
        doc = dtype_config_doc(dc)
        own = dc.name if self._spec_names else None
        signature = (own, _signature(doc))
        name = self._by_signature.get(signature)
        if name is None:
            name = own or self._known.get(signature[1]) or derived_name(doc)
            if name in self.docs:  # another config has that name: spell the constraints out
                name = derived_name(doc, detailed=True)
            name = self._unique(name)
            self._by_signature[signature] = name
            self.docs[name] = doc
        return name

    def names_of(self, dtype_configs: Iterable[Facts]) -> list[str]:
        return [self.name_of(dc) for dc in dtype_configs]

    def _unique(self, base: str) -> str:
        name, n = base, 1
        while name in self.docs:
            n += 1
            name = f"{base}_{n}"
        return name
