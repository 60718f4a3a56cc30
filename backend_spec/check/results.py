"""The check's result data model, shared by the runner, the reporters and the golden files.

Plain dataclasses of JSON-friendly values: results travel back from worker processes by pickle
and out to users as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Status = Literal["pass", "fail", "skip"]


@dataclass
class PatternResult:
    """One case: a pattern with one of its DTypeConfigs (``ptq`` or ``qat``), or a ``fusion``.
    Did a minimal model containing it quantize as the spec declares?"""

    pattern: str
    status: Status
    #: A short reason (one line); ``detail`` keeps torch's full text.
    reason: str = ""
    sqnr_db: float | None = None
    #: The quantization kind exercised (``static quint8``, ``dynamic quint8``, ``fp16``, ...).
    kind: str = ""
    #: ``ptq``, ``qat`` or ``fusion``.
    mode: str = "ptq"
    #: Which of the pattern's DTypeConfigs (0-based); ``None`` for a fusion case.
    dtype_index: int | None = None
    detail: str = ""
    #: SQNR is the reference model's: the engine has no kernels for these dtypes.
    reference_fallback: bool = False
    #: What prepare/convert produced (see :mod:`backend_spec.check.signature`).
    signature: dict[str, list[str]] = field(default_factory=dict)
    #: For a skip that one more pattern entry would run: that entry, as YAML.
    hint: str = ""
    #: ``torch:NAME`` when the case's entry came unchanged from that built-in (``extends``)
    #: and the built-in itself fails or skips the case the same way: torch's, not the spec's.
    inherited: str = ""

    @property
    def key(self) -> str:
        """The case's identity in a golden file: ``nn.Linear | ptq#1``."""
        case = self.mode if self.dtype_index is None else f"{self.mode}#{self.dtype_index}"
        return f"{self.pattern} | {case}"


@dataclass
class ModelResult:
    """One whole model quantized with the backend: what got quantized, accuracy, speed."""

    name: str
    status: Status
    reason: str = ""
    #: Graph node name -> quantized kind (``static quint8``, ``dynamic quint8``, ``fp32``...).
    quantized: dict[str, str] = field(default_factory=dict)
    sqnr_db: float | None = None
    fp32_ms: float | None = None
    int8_ms: float | None = None
    detail: str = ""
    reference_fallback: bool = False
    signature: dict[str, list[str]] = field(default_factory=dict)
    #: The lowered model fails through torch's lowering of ops the spec does not claim
    #: (``reason`` says how): not the spec's failure, so the reference model's SQNR stands.
    torch_limit: bool = False


@dataclass
class CheckReport:
    """Everything ``bespec check`` found for one backend on one engine."""

    backend: str
    engine: str
    patterns: list[PatternResult] = field(default_factory=list)
    models: list[ModelResult] = field(default_factory=list)
    seconds: float = 0.0
    #: Report-wide notes, each said once (not on every row).
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether the spec failed: a model, or a case that is not torch's own (inherited)."""
        cases = (r for r in self.patterns if not r.inherited)
        return any(r.status == "fail" for r in (*cases, *self.models))

    def counts(self) -> dict[str, int]:
        """Case results by status; ``inherited`` counts torch's own failures and skips (see
        :attr:`PatternResult.inherited`), which ``fail`` and ``skip`` leave out."""
        out = {"pass": 0, "fail": 0, "skip": 0, "inherited": 0}
        for result in self.patterns:
            out["inherited" if result.inherited else result.status] += 1
        return out

    def exercised(self) -> int:
        """Cases that ran (passed or failed), as opposed to skipped."""
        return sum(r.status != "skip" for r in self.patterns)

    def pass_fraction(self) -> float | None:
        """Passing cases over all cases; ``None`` when there were none (nothing to claim)."""
        return self.counts()["pass"] / len(self.patterns) if self.patterns else None

    def add_note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def to_json(self) -> dict:
        fraction = self.pass_fraction()
        summary = {
            **self.counts(),
            "cases": len(self.patterns),
            "patterns": len({r.pattern for r in self.patterns}),
            "exercised": self.exercised(),
            "pass_fraction": None if fraction is None else round(fraction, 4),
        }
        return {
            "backend": self.backend,
            "engine": self.engine,
            "seconds": round(self.seconds, 3),
            "summary": summary,
            "notes": list(self.notes),
            "patterns": [{"key": r.key, **asdict(r)} for r in self.patterns],
            "models": [asdict(m) for m in self.models],
        }
