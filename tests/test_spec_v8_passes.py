"""spec_version 8: ``transform_for_annotation``, allow-listed graph passes run before annotation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _export_helpers import observed

import backend_spec
from backend_spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
PASSES = ["bespec_passes"]

SPEC = """spec_version: 8
name: hardswish_npu
transform_for_annotation: [{passes}]
dtype_configs:
  act: {{input_dtype: quint8, output_dtype: quint8}}
patterns:
  - pattern: F.hardsigmoid
    dtype_configs: [act]
    aten: [[aten.hardsigmoid.default]]
  - pattern: torch.mul
    dtype_configs: [act]
    aten: [[aten.mul.Tensor]]
"""

NAMED = "bespec_passes.decompose_hardswish"
CALLED = "{call: bespec_passes.decompose, args: [{literal: hardswish}]}"


def _hardswish_graph():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Hardswish())
    return torch.export.export(model, (torch.randn(2, 4),)).module()


def _observed(prepared) -> set[str]:
    """The ATen ops of a prepared graph whose output an observer reads."""
    modules = dict(prepared.named_modules())
    return {
        str(node.target)
        for node in prepared.graph.nodes
        if node.op == "call_function"
        and any(
            u.op == "call_module"
            and "activation_post_process" in str(u.target)
            and u.target in modules
            for u in node.users
        )
    }


@pytest.mark.parametrize("passes", [NAMED, CALLED], ids=["name", "call"])
def test_the_runtime_runs_the_passes_before_annotating(passes):
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    spec = backend_spec.loads(SPEC.format(passes=passes), format="yaml", allow_imports=PASSES)
    prepared = prepare_pt2e(_hardswish_graph(), backend_spec.quantizer(spec))
    targets = {str(n.target) for n in prepared.graph.nodes if n.op == "call_function"}
    assert "aten.hardswish.default" not in targets
    # hardsigmoid's input observer sits on the edge from the linear
    assert _observed(prepared) == {
        "aten.linear.default",
        "aten.hardsigmoid.default",
        "aten.mul.Tensor",
    }


def test_passes_recompile_once_when_the_module_runs_not_after_each_pass(monkeypatch):
    """``lazily``: a pipeline that edits the graph and recompiles after each of five passes
    generates the module's code only when the module is called, once, and the module then
    computes what the eager pipeline's does."""
    import torch.fx.graph_module as graph_module

    from backend_spec.pt2e.runtime import lazily

    def relu_then_neg(gm):
        for _ in range(5):  # five passes, each changing the graph and recompiling
            node = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(node):
                value = gm.graph.call_function(torch.neg, (node.args[0],))
            node.args = (value,)
            gm.recompile()
        return gm

    def traced():
        return torch.fx.symbolic_trace(torch.nn.ReLU())

    x = torch.randn(3)
    eager, model = relu_then_neg(traced())(x), traced()
    compiled = []
    real = graph_module._exec_with_source
    monkeypatch.setattr(
        graph_module, "_exec_with_source", lambda *a, **k: compiled.append(1) or real(*a, **k)
    )
    result = lazily(relu_then_neg, model)
    assert compiled == []  # no source generated while the passes ran
    assert torch.equal(result(x), eager) and len(compiled) == 1


def test_without_the_passes_the_entries_find_nothing():
    """The control: the same entries on the graph as exported (hardswish) annotate nothing."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    text = SPEC.format(passes=NAMED).replace(f"transform_for_annotation: [{NAMED}]\n", "")
    prepared = prepare_pt2e(
        _hardswish_graph(), backend_spec.quantizer(backend_spec.loads(text, format="yaml"))
    )
    assert _observed(prepared) == set()


BAD = [
    # (passes, allow-list, code, message part)
    (NAMED, [], "BS302", "outside the allowed roots"),
    (CALLED, [], "BS302", "outside the allowed roots"),
    ("os.system", PASSES, "BS302", "outside the allowed roots"),
    (
        "torch.ao.quantization.fuser_method_mappings.fuse_conv_bn",
        PASSES,
        "BS306",
        "transform_for_annotation runs only functions of allowed modules",
    ),
    ("{sequential: nni.ConvReLU2d}", PASSES, "BS303", "builds a fuser"),
    ("bespec_passes.not_a_pass", PASSES, "BS303", "cannot take the GraphModule alone"),
    (
        "{call: bespec_passes.decompose, args: [{literal: gelu}]}",
        PASSES,
        "BS305",
        "no pass decomposes 'gelu'",
    ),
]


@pytest.mark.parametrize(("passes", "allowed", "code", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_pass_outside_the_allow_list_is_refused_at_its_place(passes, allowed, code, message):
    with pytest.raises(SpecError) as caught:
        backend_spec.loads(SPEC.format(passes=passes), format="yaml", allow_imports=allowed)
    (found,) = [d for d in caught.value.diagnostics if d.code == code]
    assert message in found.message
    # at the name itself (a form's: the value of its key)
    marker = passes.split(": ")[1].split(",")[0].rstrip("}") if passes[0] == "{" else passes
    line = SPEC.format(passes=passes).splitlines()[2]
    assert (found.line, found.column) == (3, line.index(marker) + 1)


def test_the_key_needs_version_8():
    text = SPEC.format(passes=NAMED).replace("spec_version: 8", "spec_version: 7")
    with pytest.raises(SpecError) as caught:
        backend_spec.loads(text, format="yaml", allow_imports=PASSES)
    assert [d.code for d in caught.value.diagnostics] == ["BS206"]


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
@pytest.mark.parametrize("passes", [NAMED, CALLED], ids=["name", "call"])
def test_dump_writes_the_passes_back(passes, fmt):
    spec = backend_spec.loads(SPEC.format(passes=passes), format="yaml", allow_imports=PASSES)
    text = backend_spec.dump(spec, format=fmt)
    assert "spec_version = 8" in text or "spec_version: 8" in text
    again = backend_spec.loads(text, format=fmt, allow_imports=PASSES)
    from backend_spec.export.document import pass_doc
    from backend_spec.ir.lower import backend_of

    def written(config):
        return [pass_doc(ref.function) for ref in backend_of(config).transform_for_annotation]

    assert (
        written(again)
        == written(spec)
        == [
            NAMED
            if passes == NAMED
            else {"call": "bespec_passes.decompose", "args": [{"literal": "hardswish"}]}
        ]
    )


def test_a_table_that_names_passes_needs_them():
    from backend_spec.pt2e import compile_table
    from backend_spec.pt2e.runtime import TableQuantizer

    spec = backend_spec.loads(SPEC.format(passes=NAMED), format="yaml", allow_imports=PASSES)
    table, _ = compile_table(spec)
    assert table["transform_for_annotation"] == [NAMED]
    with pytest.raises(ValueError, match="runs 1 graph passes"):
        TableQuantizer(table)


def test_export_finds_the_allow_listed_pass_that_rewrites_as_the_quantizer_does():
    """The recording runs the caller's candidate passes on the graph the quantizer received
    and keeps the one whose result is the same graph; only functions of allowed modules that
    take a GraphModule are candidates (not a fuser, not a factory)."""
    import bespec_passes
    from torchao.quantization.pt2e.quantizer import Quantizer

    from backend_spec.export.quantizer import pass_candidates, probe
    from backend_spec.export.quantizer.verify import run

    candidates = pass_candidates(PASSES)
    assert [label for label, _ in candidates] == [NAMED]

    class Decomposing(Quantizer):
        def transform_for_annotation(self, model):
            return bespec_passes.decompose_hardswish(model)

        def annotate(self, model):
            return model

        def validate(self, model):
            """Nothing to check."""

    parts = probe.SuiteParts()
    parts.add(probe.Branch("hardswish"), torch.nn.Hardswish(), (torch.randn(2, 4),))
    suite = probe.export_suite(parts).module(check_guards=False)
    recorder = probe.recording(Decomposing(), candidates)
    assert not run(suite, recorder, tuple(parts.inputs)).error
    assert recorder.pipeline == (NAMED, bespec_passes.decompose_hardswish)
    assert {op for _branch, op in recorder.where.values()} == {
        "aten.hardsigmoid.default",
        "aten.mul.Tensor",
    }
    other = probe.recording(Decomposing(), (("relu", lambda graph_module: graph_module),))
    assert not run(suite, other, tuple(parts.inputs)).error
    assert other.pipeline is None and other.rewritten


def _export(tmp_path, ref: str, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "spec.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "backend_spec", "export", ref, *flags, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), str(FIXTURES), os.environ.get("PYTHONPATH", "")) if p
            ),
            "BESPEC_CACHE_DIR": str(tmp_path / "cache"),
        },
    )
    assert "Traceback" not in done.stderr
    return done, out


@pytest.mark.slow
@pytest.mark.parametrize("allowed", [True, False], ids=["allow-listed", "not allow-listed"])
def test_export_of_a_quantizer_with_a_pass_names_it_and_verifies(tmp_path, allowed):
    """XNNPACK after decompose_hardswish: with the pass allow-listed the spec names it and
    verifies; without, the refusal names the ops the rewrite changes."""
    pytest.importorskip("executorch")
    ref = f"{FIXTURES / 'quantizers' / 'passes.py'}:xnnpack_decomposing_hardswish"
    flags = ("--allow-import", "bespec_passes") if allowed else ()
    done, out = _export(tmp_path, ref, *flags)
    if not allowed:
        assert done.returncode == 1 and not out.exists()
        assert "aten.hardswish.default: the quantizer's transform_for_annotation removes" in (
            done.stderr
        )
        return
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified: 10/10 models" in done.stderr
    assert f"note: {NAMED} rewrites the graph as the quantizer's" in done.stderr
    text = out.read_text(encoding="utf-8")
    assert "spec_version: 8" in text and f"- {NAMED}" in text


def test_diff_compares_the_passes():
    from backend_spec.analysis.compare import diff

    named = backend_spec.loads(SPEC.format(passes=NAMED), format="yaml", allow_imports=PASSES)
    called = backend_spec.loads(SPEC.format(passes=CALLED), format="yaml", allow_imports=PASSES)
    again = backend_spec.loads(SPEC.format(passes=CALLED), format="yaml", allow_imports=PASSES)
    assert diff(called, again) == []
    assert [d.field for d in diff(named, called)] == ["transform_for_annotation[0]"]


def test_the_standalone_module_takes_the_passes_from_its_caller():
    """``bespec compile --target pt2e``'s module holds the pass names as data and imports
    nothing more: ``get_quantizer(passes=...)`` takes the functions, and refuses without."""
    import bespec_passes

    from backend_spec.pt2e import compile_table
    from backend_spec.pt2e.emit import generate_module

    spec = backend_spec.loads(SPEC.format(passes=NAMED), format="yaml", allow_imports=PASSES)
    table, _ = compile_table(spec)
    source = generate_module(table, source="spec.yaml")
    assert "bespec_passes" not in source.split("TABLE = ")[0]  # no import of the pass module
    namespace: dict = {}
    exec(compile(source, "quantizer.py", "exec"), namespace)
    with pytest.raises(ValueError, match="runs 1 graph passes"):
        namespace["get_quantizer"]()
    quantizer = namespace["get_quantizer"](passes=(bespec_passes.decompose_hardswish,))
    graph = quantizer.transform_for_annotation(_hardswish_graph())
    assert "aten.hardswish.default" not in {str(n.target) for n in graph.graph.nodes}


_QSPEC = observed(observer="MinMaxObserver", kwargs={})


def _annotated_op(target: str) -> dict:
    return {
        "target": target,
        "annotated": True,
        "inputs": {"0": _QSPEC},
        "kinds": {"0": "act"},
        "output": _QSPEC,
        "weight": "1",
        "args": {},
    }


@pytest.mark.parametrize("rewritten", [True, False])
def test_inference_reads_the_ops_the_passes_made_that_no_unit_probes(rewritten):
    """Probed after the passes, a softmax unit holds the ops it became: those no unit probes
    (amax) get an entry named by their ATen op, the replaced op none; without passes, the
    unit's first op stands for the unit as before."""
    from backend_spec.export.quantizer.infer import infer
    from backend_spec.ir.lower import backend_of

    ops = [_annotated_op("aten.amax.default"), _annotated_op("aten.sub.Tensor")]
    probed = {"alone": {"aten.softmax.int": {"ops": ops, "pre": [], "post": []}}}
    names = {"aten.softmax.int": ("F.softmax",), "aten.sub.Tensor": ("torch.sub",)}
    inferred = infer(probed, names, "t", rewritten=rewritten)
    labels = {str(entry.pattern) for entry in backend_of(inferred.backend_config).entries}
    if rewritten:
        assert labels == {"aten.amax.default"}
        text = backend_spec.dump(inferred.backend_config, format="yaml")
        assert "pattern: aten.amax.default" in text
        backend_spec.loads(text, format="yaml")
    else:
        assert len(labels) == 1 and "softmax" in next(iter(labels))


#: Delegates whose transform_for_annotation an allow-listed adapter reproduces
#: (tests/fixtures/bespec_passes): factory, adapter module, modules it needs, why it is still
#: refused (None: it exports and verifies).
DELEGATES = {
    "arm_tosa": (
        "bespec_passes.arm",
        ("tosa_serializer",),
        "left after the passes (21 ops): the transformer's matmul decomposed to bmm with one "
        "shared q/k/v group, and 1-D/3-D pools, conv_transpose1d/3d, instance_norm, narrow, "
        "relu6 rewritten into ops whose output the quantizer observes",
    ),
    "qnn": (
        "bespec_passes.qnn",
        (),
        "QnnQuantizer observes its int32 bias on its own (MinMaxObserver), quantizes "
        "layer_norm's weight and leaky_relu's slope, and shares cat/chunk groups the spec splits",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DELEGATES))
def test_a_delegate_pipeline_is_named_and_only_other_constructs_are_refused(tmp_path, name):
    """With its adapter allow-listed, a delegate's export finds the pipeline: the report names
    no op for the rewrite (only constructs the format lacks), or the spec exports and verifies."""
    pytest.importorskip("executorch")
    module, needs, refusal = DELEGATES[name]
    for needed in needs:
        pytest.importorskip(needed)
    ref = f"{FIXTURES / 'quantizers' / 'delegates.py'}:{name}"
    done, out = _export(tmp_path, ref, "--allow-import", module)
    # no rewrite gap ("transform_for_annotation removes/introduces N of its nodes"); the note
    # naming the adapter says "... rewrites the graph as the quantizer's transform_for_annotation"
    assert not re.search(r"transform_for_annotation (removes|introduces) \d+", done.stderr)
    assert f"note: {module}." in done.stderr  # the adapter reproduced the pipeline
    if done.returncode != 0:
        assert done.returncode == 1 and not out.exists(), done.stderr[-2000:]
        assert "error: the spec cannot express the quantizer on" in done.stderr
        pytest.xfail(refusal)
    assert "verified: 10/10 models" in done.stderr
    assert f"transform_for_annotation:\n  - {{call: {module}" in out.read_text(
        encoding="utf-8"
    ) or f"  - {module}." in out.read_text(encoding="utf-8")
