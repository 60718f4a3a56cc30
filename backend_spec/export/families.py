"""Family labels for exported patterns, used only for the YAML group comments.

torch builds its backends family by family (conv, linear, binary ops, ...), so patterns of a
family sit together; labelling each pattern and commenting where the label changes gives a
reader the same landmarks as torch's ``_common_operator_config_utils.py``. The labels are a
reading aid: nothing loads them back.
"""

from __future__ import annotations

from typing import Any

from backend_spec._torch import BackendPatternConfig, DTypeConfig, ObservationType
from backend_spec.names.dtypes import dtype_config_list
from backend_spec.names.naming import op_name

#: Families recognised from the ops' names, first match wins (so ``(nn.Linear,
#: nn.BatchNorm1d)`` is linear, not batch norm).
_KEYWORD_FAMILIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("conv",), "Convolution"),
    (("linear", "addmm"), "Linear"),
    (("batchnorm", "bnrelu"), "Batch norm"),
    (("layernorm", "layer_norm"), "Layer norm"),
    (("gru", "lstm", "rnn"), "Recurrent"),
    (("embedding",), "Embedding"),
    (("matmul", ".add", ".sub", ".mul"), "Binary ops"),
)

_OBSERVATION_FAMILIES: dict[ObservationType, str] = {
    ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT: "Ops sharing their input's observer",
    ObservationType.INPUT_OUTPUT_NOT_OBSERVED: "Tensor-info ops (not observed)",
}


def _op_names(pattern: Any) -> list[str]:
    if isinstance(pattern, tuple):
        return [name for p in pattern for name in _op_names(p)]
    return [(op_name(pattern) or "").lower()]


def _has_fixed_qparams(config: BackendPatternConfig) -> bool:
    return any(
        getattr(dc, f"{key}_dtype_with_constraints").scale_exact_match is not None
        for dc in dtype_config_list(config.dtype_configs)
        if isinstance(dc, DTypeConfig)
        for key in ("input", "output")
    )


def family_of(config: BackendPatternConfig) -> str:
    """The family a pattern belongs to, for grouping comments."""
    if config._num_tensor_args_to_observation_type:
        return "Binary ops"
    if config.observation_type in _OBSERVATION_FAMILIES:
        return _OBSERVATION_FAMILIES[config.observation_type]
    if _has_fixed_qparams(config):
        return "Fixed-qparams ops (sigmoid, tanh, ...)"
    names = " ".join(_op_names(config._pattern_complex_format or config.pattern))
    for keywords, family in _KEYWORD_FAMILIES:
        if any(k in names for k in keywords):
            return family
    return "Other ops"
