"""``bespec check``: quantize minimal per-pattern models and reference models on the host CPU.

Entry points: :func:`run_check` (-> :class:`CheckReport`), :func:`compare_to_golden` /
:func:`write_golden` / :func:`read_golden`, and :func:`emit_pytest`.
"""

from backend_spec.check.cases import SQNR_THRESHOLDS, build_cases, check_case
from backend_spec.check.emit_pytest import emit_pytest
from backend_spec.check.engines import engine_for
from backend_spec.check.golden import compare_to_golden, read_golden, write_golden
from backend_spec.check.results import CheckReport, ModelResult, PatternResult
from backend_spec.check.run import run_check

__all__ = [
    "SQNR_THRESHOLDS",
    "CheckReport",
    "ModelResult",
    "PatternResult",
    "build_cases",
    "check_case",
    "compare_to_golden",
    "emit_pytest",
    "engine_for",
    "read_golden",
    "run_check",
    "write_golden",
]
