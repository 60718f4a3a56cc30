"""``bespec diff A B --behaviour``: specs that say the same thing in other words quantize
identically; a spec with one entry changed is reported by the ops it changes, per flow.

(The shipped ``specs/x86_inductor.yaml`` against a fresh ``bespec export`` of
``X86InductorQuantizer`` is checked where that export is made, in test_export_quantizer.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import backend_spec
from backend_spec.cli.app import app
from backend_spec.export.behaviour import compare_behaviour, flows_in_play, reference_nets

ROOT = Path(__file__).resolve().parent.parent
X86 = (ROOT / "specs" / "x86_inductor.yaml").read_text(encoding="utf-8")
TUTORIAL = (ROOT / "specs" / "tutorial.yaml").read_text(encoding="utf-8")
runner = CliRunner()

#: Other words, same behaviour: dtype configs renamed, a chain written as a list of alternatives.
X86_RESPELLED = (
    X86.replace("weighted", "w8a8")
    .replace("[activation]", "[a8]")
    .replace("  activation:\n", "  a8:\n")
    .replace("aten: [[aten.cat.default]]", "aten: [[[aten.cat.default]]]")
)
#: One entry changed: cat quantized after any quantized input, not only when all are.
X86_CAT = X86.replace("quantize: if_all_inputs_quantized", "quantize: if_input_quantized")

#: (case, A text, B text, flows, differing (flow, op) pairs expected: empty for identical)
CASES = [
    ("x86 respelled", X86, X86_RESPELLED, ("pt2e",), set()),
    ("x86 cat changed", X86, X86_CAT, ("pt2e",), {("pt2e", "aten.cat.default")}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "a", "b", "flows", "ops"), CASES, ids=[c[0] for c in CASES])
def test_behaviour_through_the_cli(tmp_path: Path, case, a, b, flows, ops) -> None:
    assert X86_RESPELLED != X86 and X86_CAT != X86  # the edits apply
    paths = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for path, text in zip(paths, (a, b), strict=True):
        path.write_text(text, encoding="utf-8")
    configs = [backend_spec.load(path) for path in paths]
    assert flows_in_play(*configs) == flows
    result = runner.invoke(app, ["diff", *map(str, paths), "--behaviour", "--format", "json"])
    import json

    found = json.loads(result.stdout[result.stdout.index("{") :])
    assert result.exit_code == (1 if ops else 0), result.output
    assert found["flows"] == list(flows) and found["identical"] == (not ops)
    assert {(d["flow"], d["op"]) for d in found["differences"]} >= ops
    if ops:  # the changed entry's op is named, with what differs on its nodes
        (cat,) = [d for d in found["differences"] if d["op"] == "aten.cat.default"]
        assert any("cat" in line and " vs " in line for line in cat["nodes"])


#: FX: the tutorial's weighted dtype config with a narrower input range (one entry changed).
TUTORIAL_NARROW = TUTORIAL.replace(
    "      quant_max_upper_bound: 255\n", "      quant_max_upper_bound: 127\n", 1
)
TUTORIAL_RESPELLED = TUTORIAL.replace("weighted_int8", "int8").replace(
    "observation_type: output_use_different_observer_as_input\n    dtype_configs: [int8]\n"
    "    root_module: nn.Linear",
    "dtype_configs: [int8]\n    root_module: nn.Linear",
)


@pytest.mark.parametrize(
    ("b", "ops"),
    [(TUTORIAL_RESPELLED, set()), (TUTORIAL_NARROW, {"nn.Linear"})],
    ids=["respelled", "narrower range"],
)
def test_fx_behaviour_names_the_ops(tmp_path: Path, b: str, ops: set[str]) -> None:
    assert b != TUTORIAL
    paths = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    for path, text in zip(paths, (TUTORIAL, b), strict=True):
        path.write_text(text, encoding="utf-8")
    first, second = (backend_spec.load(path) for path in paths)
    assert flows_in_play(first, second) == ("fx",)
    nets = {name: reference_nets()[name] for name in ("mlp", "conv_bn_relu")}
    result = compare_behaviour(first, second, ("fx",), fx_models=nets)
    assert result.fx_models == 2 and result.pt2e_probes == 0
    named = {op for flow, op in result.differences if flow == "fx"}
    # The changed entry's op, and the ops that read its output (their inputs' qparams moved).
    assert ops <= named and bool(named) == bool(ops)
    assert result.identical == (not ops)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--flow", "both"], "--flow applies to --behaviour"),
        (["--behaviour", "--flow", "fast"], "--flow must be fx, pt2e or both"),
    ],
)
def test_behaviour_flag_misuse_exits_2(args: list[str], message: str) -> None:
    spec = str(ROOT / "specs" / "tutorial.yaml")
    result = runner.invoke(app, ["diff", spec, spec, *args])
    assert result.exit_code == 2 and message in result.output
