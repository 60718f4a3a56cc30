"""What lowering one model showed: per quantized op, the kernel it reached or why not.

Plain data (picklable: workers return it), read by the reporter (``cli/render/lower.py``), the
goldens (:mod:`.golden`) and ``explain --lower``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Lowered output vs the converted pt2e model: below this SQNR (dB) the outputs diverge. int8
#: kernels round and accumulate differently from the converted model's float arithmetic; on the
#: zoo they stay above 30 dB (a few elements one quantization step apart).
MIN_SQNR_DB = 20.0


@dataclass(frozen=True)
class OpResult:
    """One quantized op after lowering."""

    op: str  # node names of the match, "conv2d+relu"
    targets: tuple[str, ...]
    entry: str  # the spec entry's label
    origin: str  # file:line of the entry
    kernel: str  # what runs it ("xnnpack delegate 0", "onednn qconv_pointwise", ...) or ""
    ok: bool
    reason: str = ""  # why it does not reach an int8 kernel


@dataclass
class ModelResult:
    """One model lowered: its ops, what stayed outside, numbers and timings, or the crash."""

    model: str
    target: str
    ops: list[OpResult] = field(default_factory=list)
    #: Ops left outside the delegate (XNNPACK) or not lowered, as "node (target)".
    outside: list[str] = field(default_factory=list)
    #: Where each node of the annotated graph ended up ("xnnpack delegate 0", "outside",
    #: "onednn.qconv_pointwise", "fp32", ...): what ``explain --lower`` shows per node.
    placement: dict[str, str] = field(default_factory=dict)
    #: inductor's ``*_lower_count`` counters (empty for XNNPACK).
    counters: dict[str, int] = field(default_factory=dict)
    delegates: int = 0
    sqnr_db: float | None = None  # lowered vs converted; None: identical
    max_abs: float | None = None
    int8_us: float | None = None
    fp32_us: float | None = None
    #: "stage: message" when lowering or running crashed; with the known reason, if any.
    error: str = ""
    error_reason: str = ""
    #: Set when the float model does not lower either: nothing the spec can change.
    skipped: str = ""
    #: A limit of this host that explains diverging outputs (reported, not failed).
    host_note: str = ""

    @property
    def latency_ratio(self) -> float | None:
        """int8 median over fp32 median (below 1: the int8 program is faster)."""
        if not self.int8_us or not self.fp32_us:
            return None
        return self.int8_us / self.fp32_us

    @property
    def diverged(self) -> bool:
        return (
            self.sqnr_db is not None
            and math.isfinite(self.sqnr_db)
            and (self.sqnr_db < MIN_SQNR_DB)
        )

    @property
    def failed_ops(self) -> list[OpResult]:
        return [op for op in self.ops if not op.ok]

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        return not self.error and not self.failed_ops and (not self.diverged or self.host_note)

    @property
    def status(self) -> str:
        return "skip" if self.skipped else "ok" if self.ok else "fail"


@dataclass
class LowerReport:
    """``check --lower TARGET`` over some models."""

    target: str
    backend: str
    models: list[ModelResult]
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(1 for model in self.models if not model.ok)


def blame_crash(result: ModelResult, ops: list[Any], target: str) -> None:
    """After a crash: the ops a known constraint explains fail with it (so the report names
    them), failed verdicts stay, the others keep theirs or say they were not judged."""
    from backend_spec.lower.constraints import known_reason

    judged = {verdict.op: verdict for verdict in result.ops}
    stage = result.error.split(":", 1)[0]
    verdicts = []
    for op in ops:
        reason = known_reason(target, op.facts)
        before = judged.get(op.name)
        if before is not None and not before.ok:
            verdicts.append(before)  # the lowering's own finding is the more precise one
        elif reason or before is None:
            why = f"the program crashed in {stage}: {reason}" if reason else "not judged: "
            why += "" if reason else f"the lowering crashed in {stage}"
            kernel = before.kernel if before is not None else ""
            verdicts.append(OpResult(op.name, op.targets, op.entry, op.origin, kernel, False, why))
        else:
            verdicts.append(before)
    result.ops = verdicts
