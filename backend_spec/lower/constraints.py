"""The one table of what each lowering is known to need, with where it was found.

The lowering itself says *that* an op missed its int8 kernel (a node outside the delegate, a
zero counter, a crash); a row here says *why*, in words a spec author can act on, when the
quantized op's facts (:class:`Facts`, read off the converted graph) match the row. When no row
matches, the report quotes what the lowering said (the partitioner's reason, the error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Facts:
    """What the converted graph says about one quantized op."""

    targets: tuple[str, ...]
    #: int8 or uint8 of the dequantize feeding its activation input (None: float input).
    activation: str | None
    #: "per_channel" / "per_tensor" of its weight's dequantize (None: no quantized weight).
    weight: str | None
    #: Whether every weight zero point is 0.
    weight_symmetric: bool | None
    #: Whether the activation uses the dtype's full range (uint8 [0, 255], not reduce_range).
    activation_full_range: bool | None = None
    #: Whether this host's CPU has VNNI (None: not asked).
    host_vnni: bool | None = None


@dataclass(frozen=True)
class Constraint:
    target: str  # "xnnpack" or "inductor"
    applies: Callable[[Facts], bool]
    reason: str
    source: str
    #: A limit of the host CPU, not of the backend: what it explains is reported, not failed
    #: (the same spec is right on the CPUs the backend targets).
    host: bool = False


def _weighted(facts: Facts) -> bool:
    return any(op in target for target in facts.targets for op in ("conv", "linear"))


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        "xnnpack",
        lambda f: f.activation == "uint8",
        "XNNPACK takes signed int8 activations (qint8): its partitioner leaves uint8 "
        "quantize/dequantize outside the delegate, where no kernel runs them",
        "executorch 1.5.1 backends/xnnpack/partition/config/xnnpack_config.py "
        "(_check_node_has_valid_dtype: q/dq values must be int8); measured in "
        "docs/lowering.md",
    ),
    Constraint(
        "xnnpack",
        lambda f: f.weight == "per_tensor" and f.weight_symmetric is False,
        "XNNPACK takes symmetric int8 weights (zero point 0): the runtime refuses affine "
        "per-tensor weights (XNNCompiler::compileModel failed)",
        "executorch 1.5.1 backends/xnnpack/runtime/XNNCompiler.cpp; measured in README 'Lowering'",
    ),
    Constraint(
        "inductor",
        lambda f: f.weight == "per_tensor" and _weighted(f),
        "x86 inductor lowers conv and linear only with per-channel weights (its weight-prepack "
        "patterns match dequantize_per_channel)",
        "torch 2.13 torch/_inductor/fx_passes/quantization.py (_register_qconv_weight_prepack, "
        "_register_qlinear_weight_prepack); torchao 0.18 "
        "torchao/quantization/pt2e/inductor_passes/x86.py on torch 2.14",
    ),
    Constraint(
        "inductor",
        lambda f: f.activation == "int8" and _weighted(f),
        "x86 inductor takes unsigned int8 activations (quint8): oneDNN's int8 conv and linear "
        "refuse int8 input ('Input tensor should have uint8')",
        "torch 2.13 aten/src/ATen/native/quantized/cpu/qconv.cpp and qlinear.cpp (oneDNN "
        "path); measured in README 'Lowering'",
    ),
    Constraint(
        "inductor",
        lambda f: (
            f.activation == "uint8" and bool(f.activation_full_range) and f.host_vnni is False
        ),
        "this CPU has no VNNI: oneDNN's u8s8 int8 kernels add products in saturating 16-bit "
        "pairs, so full-range uint8 activations overflow (reduce_range: true avoids it; CPUs "
        "with VNNI, which x86 inductor targets, do not saturate)",
        "oneDNN developer guide, 'Nuances of int8 Computations' (vpmaddubsw saturation without "
        "VNNI); the same reason fbgemm defaults to reduce_range; measured in README 'Lowering'",
        host=True,
    ),
)


def known_reason(target: str, facts: Facts, *, host: bool = False) -> str:
    """The reasons of every row of ``target`` that the facts match ("" when none does); with
    ``host``, of the host rows only."""
    return "; ".join(
        c.reason for c in CONSTRAINTS if c.target == target and c.host == host and c.applies(facts)
    )


def crash_reason(target: str, facts: Iterable[Facts]) -> str:
    """The known reasons behind a crash of a program with ops of these facts, each once."""
    reasons = dict.fromkeys(known_reason(target, f) for f in facts)
    return "; ".join(reason for reason in reasons if reason)
