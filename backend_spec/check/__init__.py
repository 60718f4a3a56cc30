"""``bespec check``: quantize minimal per-pattern models and reference models on the host CPU.

Entry points: :func:`run_check` (-> :class:`CheckReport`), :func:`check_command` (the CLI),
:func:`compare_to_golden` / :func:`write_golden` / :func:`read_golden`, and :func:`emit_test`.
"""

from backend_spec.check.emit_test import emit_test
from backend_spec.check.golden import compare_to_golden, read_golden, write_golden
from backend_spec.check.results import CheckReport, ModelResult, PatternResult
from backend_spec.check.run import SQNR_THRESHOLDS, check_pattern, host_engine, run_check
from backend_spec.cli.check import check_command

__all__ = [
    "SQNR_THRESHOLDS",
    "CheckReport",
    "ModelResult",
    "PatternResult",
    "check_command",
    "check_pattern",
    "compare_to_golden",
    "emit_test",
    "host_engine",
    "read_golden",
    "run_check",
    "write_golden",
]
