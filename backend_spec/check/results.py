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
    """One pattern: did a minimal model containing it quantize as the spec declares?"""

    pattern: str
    status: Status
    reason: str = ""
    sqnr_db: float | None = None
    #: The quantization kind exercised (``static quint8``, ``dynamic quint8``, ``fp16``, ...).
    kind: str = ""


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


@dataclass
class CheckReport:
    """Everything ``bespec check`` found for one backend on one engine."""

    backend: str
    engine: str
    patterns: list[PatternResult] = field(default_factory=list)
    models: list[ModelResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.status == "fail" for r in (*self.patterns, *self.models))

    def counts(self) -> dict[str, int]:
        """Pattern results by status."""
        out = {"pass": 0, "fail": 0, "skip": 0}
        for result in self.patterns:
            out[result.status] += 1
        return out

    def pass_fraction(self) -> float:
        """Patterns exercised and passing, over all patterns with DTypeConfigs."""
        return self.counts()["pass"] / len(self.patterns) if self.patterns else 1.0

    def to_json(self) -> dict:
        return {
            "backend": self.backend,
            "engine": self.engine,
            "seconds": round(self.seconds, 3),
            "summary": {**self.counts(), "pass_fraction": round(self.pass_fraction(), 4)},
            "patterns": [asdict(r) for r in self.patterns],
            "models": [asdict(r) for r in self.models],
        }
