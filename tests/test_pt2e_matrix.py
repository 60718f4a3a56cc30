"""The zoo x built-in-spec matrix, FX versus pt2e (slow).

Every pair must be identical (same output bit for bit, same number of activation quantize
ops) unless ``fixtures/pt2e_differences.yaml`` lists it with a documented difference class
(``backend_spec.pt2e.flows.DIFFERENCE_CLASSES``) that the comparison itself detects. A listed
pair that has become identical fails too, so the allow-list cannot go stale.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from _matrix import assert_allowed
from ruamel.yaml import YAML

import backend_spec

pytest.importorskip("torchao")

from backend_spec.check import zoo  # noqa: E402
from backend_spec.pt2e import flows, nets  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SPECS = ("tutorial", "x86", "fbgemm", "qnnpack", "native", "onednn", "executorch", "tensorrt")
ALLOWED = YAML(typ="safe").load((ROOT / "tests/fixtures/pt2e_differences.yaml").read_text())
CASES = [(spec, model) for spec in SPECS for model in zoo.MODELS] + [
    (spec, net) for spec in ("tutorial", "x86") for net in ("tutorial_net", "x86_net")
]


@functools.cache
def backend_config(spec: str):
    return backend_spec.load(ROOT / "specs" / f"{spec}.yaml")


@functools.cache
def quantizer_table(spec: str):
    return backend_spec.quantizer(ROOT / "specs" / f"{spec}.yaml")


def test_allow_list_uses_documented_classes() -> None:
    assert set(ALLOWED["cases"].values()) <= set(flows.DIFFERENCE_CLASSES)
    assert set(ALLOWED["cases"]) <= {f"{spec}/{model}" for spec, model in CASES}


@pytest.mark.parametrize(("spec", "model"), CASES, ids=lambda v: v)
def test_fx_and_pt2e_agree(spec: str, model: str) -> None:
    from backend_spec.pt2e.runtime import TableQuantizer

    cached = quantizer_table(spec)

    def fresh() -> TableQuantizer:
        made = TableQuantizer(cached.table)
        made.report = cached.report
        return made

    factory = {**zoo.MODELS, **nets.NETS}[model]
    result = flows.compare(model, backend_config(spec), fresh, factory)
    listed = ALLOWED["cases"].get(f"{spec}/{model}")
    assert_allowed(f"{spec}/{model}", result, listed)
    if listed == "rounding_ties":
        assert result.between_db >= flows.EQUIVALENT_DB


#: Specs of the per-pattern matrix (the x86-sized ones take minutes; their ops are covered
#: by the zoo matrix above).
PATTERN_SPECS = ("tutorial", "executorch")


@pytest.mark.parametrize("spec", PATTERN_SPECS)
def test_per_pattern_fx_and_pt2e_agree(spec: str) -> None:
    """Each pattern's one-op model (the check's synthesizer): identical, or skipped by the
    quantizer with a reason, or a documented difference class."""
    from backend_spec.analysis.qconfigs import op_qconfigs, pattern_ops
    from backend_spec.check.synthesize import SkipPattern, synthesize
    from backend_spec.pt2e.rules import ops_label

    bc = backend_config(spec)
    built = quantizer_table(spec)
    skipped = {label for label, _reason in built.report.skipped}
    chosen = op_qconfigs(bc, None)
    identical, unexplained = 0, []
    for config in bc.configs:
        if not config.dtype_configs or config.pattern is None:
            continue
        ops = pattern_ops(config)
        try:
            made = synthesize(config, qconfig=chosen.get(ops[0]))
        except SkipPattern:
            continue
        label = ops_label(ops)
        try:
            result = flows.compare(
                label, bc, lambda: built, lambda made=made: (made.model, made.example_inputs)
            )
        except Exception as exc:  # FX itself refuses some (QAT-module) models
            if label not in skipped:
                unexplained.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        if result.identical:
            identical += 1
        elif label not in skipped and not result.classes:
            unexplained.append(f"{label}: max {result.max_diff:.3g}")
    assert unexplained == []
    assert identical > 0
