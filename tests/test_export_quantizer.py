"""`bespec export module:factory` for pt2e Quantizers: probe, infer, verify, write or refuse.

Fast tests cover reading annotations and inference on hand-made probe data; the slow ones
export real quantizers (executorch's XNNPACKQuantizer, torchao's X86InductorQuantizer, the
fixtures in tests/fixtures/quantizers/odd.py) through the CLI and compare the written spec's
quantizer with the original on models the export never saw.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from torchao.quantization.pt2e.observer import HistogramObserver  # noqa: E402
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from backend_spec.export.quantizer import is_quantizer, probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "quantizers"
HAS_EXECUTORCH = importlib.util.find_spec("executorch") is not None
needs_executorch = pytest.mark.skipif(
    not HAS_EXECUTORCH,
    reason="executorch cannot be imported (pip install --no-deps executorch==1.5.1 "
    "flatbuffers tabulate)",
)

ACT = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-128,
    quant_max=127,
    qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
)


def _graph():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    graph.output(relu)
    return x, relu


def test_observed_qspec_is_read_with_its_observer_and_arguments():
    x, relu = _graph()
    described = probe.describe_qspec(ACT, relu, {"0": x})
    assert described["kind"] == "observed"
    assert described["observer"] == "HistogramObserver"
    assert described["kwargs"] == {"eps": 2**-12}
    qrange = (described["dtype"], described["quant_min"], described["quant_max"])
    assert qrange == ("int8", -128, 127)


@pytest.mark.parametrize(
    ("qspec", "expected"),
    [
        (lambda x, relu: SharedQuantizationSpec((x, relu)), "input:0"),
        (lambda x, relu: SharedQuantizationSpec(x), "producer:0"),
        (lambda x, relu: SharedQuantizationSpec(relu), "output"),
    ],
)
def test_shared_qspecs_are_read_relative_to_the_node(qspec, expected):
    x, relu = _graph()
    described = probe.describe_qspec(qspec(x, relu), relu, {"0": x})
    assert described == {"kind": "shared", "with": expected}


def test_fixed_qspec_keeps_scale_and_zero_point():
    x, relu = _graph()
    fixed = FixedQParamsQuantizationSpec(torch.uint8, 1 / 256, 0, 0, 255, torch.per_tensor_affine)
    described = probe.describe_qspec(fixed, relu, {"0": x})
    assert (described["kind"], described["scale"], described["zero_point"]) == ("fixed", 1 / 256, 0)


def test_quantizers_are_recognised_and_backend_configs_are_not():
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import X86InductorQuantizer

    from backend_spec._torch import BackendConfig

    assert is_quantizer(X86InductorQuantizer())
    assert not is_quantizer(BackendConfig("x"))


def _op(inputs, output, kinds):
    return {
        "target": "aten.conv2d.default",
        "annotated": True,
        "inputs": inputs,
        "kinds": kinds,
        "output": output,
    }


def _described(qspec):
    return probe.describe_qspec(qspec, None, {})


CASES = [
    # (what the quantizer wrote on a lone conv, the policy or gap expected)
    ("observed output", _described(ACT), {}, None),
    ("float output", None, {"output": "if_consumer_quantized"}, None),
    (
        "other output qspec",
        {**_described(ACT), "quant_min": -100},
        {},
        "its output qspec differs from its input's",
    ),
]


@pytest.mark.parametrize(("label", "output", "policy", "gap"), CASES, ids=[c[0] for c in CASES])
def test_inference_of_a_conv_entry(label, output, policy, gap):
    weight = {
        **_described(ACT),
        "qscheme": "per_channel_symmetric",
        "ch_axis": 0,
        "observer": "PerChannelMinMaxObserver",
    }
    kinds = {"0": "act", "1": "param", "2": "param"}
    op = _op({"0": _described(ACT), "1": weight, "2": None}, output, kinds)
    probed = {"alone": {"aten.conv2d.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.conv2d.default": ("F.conv2d",)}, "t")
    (config,) = inferred.backend_config.configs
    from backend_spec.ir.lift import lift_entry

    entry = lift_entry(config)
    assert entry.aten == ((("aten.conv2d.default",),),)
    assert dict(entry.policy) == policy
    (dtype_config,) = entry.dtype_configs
    assert dtype_config.mapping("weight_dtype").get("granularity") == "per_channel"
    assert dtype_config.mapping("input_dtype").get("observer") == "histogram"
    assert dtype_config.mapping("input_dtype").get("scale_min_lower_bound") == 2**-12
    assert [g.what for g in inferred.gaps] == ([gap] if gap else [])


def test_unknown_observer_arguments_are_a_gap():
    odd = {**_described(ACT), "kwargs": {"eps": 2**-12, "bins": 128}}
    op = _op({"0": odd}, odd, {"0": "act"})
    probed = {"alone": {"aten.relu.default": {"ops": [op], "pre": [], "post": []}}}
    inferred = infer(probed, {"aten.relu.default": ("F.relu",)}, "t")
    assert any("['bins']" in gap.what for gap in inferred.gaps)


def _conv_relu_probes(functional_fused: bool) -> dict:
    """Probe data of conv + relu written with modules (fused: one output, on the relu) and
    with ``F.relu`` (fused alike, or conv and relu annotated on their own)."""
    weight = {**_described(ACT), "qscheme": "per_channel_symmetric", "ch_axis": 0}
    conv_kinds = {"0": "act", "1": "param"}
    conv = _op({"0": _described(ACT), "1": weight}, None, conv_kinds)
    relu = {**_op({}, _described(ACT), {"0": "act"}), "target": "aten.relu.default"}
    fused = [conv, relu]
    apart = [{**conv, "output": _described(ACT)}, {**relu, "inputs": {"0": _described(ACT)}}]
    key = "nn.Conv2d>nn.ReLU"
    units = {
        key: {"ops": fused},
        f"{key}@nn.Conv2d>F.relu": {"ops": fused if functional_fused else apart},
    }
    return {"alone": {k: {**v, "pre": [], "post": []} for k, v in units.items()}}


@pytest.mark.parametrize("functional_fused", [True, False], ids=["any_spelling", "modules_only"])
def test_a_fusion_the_quantizer_matches_by_module_is_spelled_with_modules(functional_fused):
    from backend_spec.ir.lift import lift_entry

    names = {
        "nn.Conv2d>nn.ReLU": ("nn.Conv2d", "nn.ReLU"),
        "nn.Conv2d>nn.ReLU@nn.Conv2d>F.relu": ("nn.Conv2d", "F.relu"),
    }
    inferred = infer(_conv_relu_probes(functional_fused), names, "t")
    (config,) = inferred.backend_config.configs
    if functional_fused:  # the ATen chain: matched however the model writes it
        assert lift_entry(config).aten == (
            (("aten.conv2d.default",), ("aten.relu.default", "aten.relu_.default")),
        )
    else:  # the modules only, and the conv keeps its weight quantized (a reference module)
        assert config.pattern == (torch.nn.Conv2d, torch.nn.ReLU) and not lift_entry(config).aten
        assert config.root_module is torch.nn.Conv2d


def _bespec(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "backend_spec", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        timeout=3600,
    )


def test_probe_models_need_a_quantizer():
    done = _bespec("export", "fbgemm", "--probe-models", "x.py:f")
    assert done.returncode == 2
    assert "--probe-models applies to a pt2e Quantizer" in done.stderr


def _export(tmp_path, ref, *extra):
    out = tmp_path / "spec.yaml"
    done = _bespec("export", ref, "-o", str(out), *extra)
    return done, out


def _hidden_models(*excluded: str):
    """Models the export never saw: ResNet-18 shaped, and the parity nets of issue 18."""
    from backend_spec.pt2e import parity_nets
    from backend_spec.pt2e.nets import NETS

    models = [("resnet18_net", NETS["resnet18_net"]), *parity_nets.PARITY_NETS.items()]
    return [(name, factory) for name, factory in models if name not in excluded]


def _matches(spec: Path, original, *excluded: str) -> list[str]:
    import backend_spec
    from backend_spec.pt2e.compare import compare_quantizers

    models = _hidden_models(*excluded)
    results = compare_quantizers(original, lambda: backend_spec.quantizer(spec), models)
    return [f"{r.name}: {d}" for r in results for d in r.differences]


# --- the slow tests: one CLI export per quantizer, checked on models it never saw -----------

XNNPACK_FACTORY = """\
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)

def make():
    q = XNNPACKQuantizer()
    q.set_global(get_symmetric_quantization_config(is_per_channel={per_channel}))
    return q
"""

X86_FACTORY = """\
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

def make():
    q = X86InductorQuantizer()
    q.set_global(get_default_x86_inductor_quantization_config())
    return q
"""


def _factory_module(folder: Path, source: str):
    """The factory file written and imported (the original the spec is compared with)."""
    path = folder / "factory.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"factory_{folder.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def _export_factory(folder: Path, source: str):
    """(CLI result, spec path, the original's factory) of exporting ``source``'s ``make``."""
    path, module = _factory_module(folder, source)
    out = folder / "spec.yaml"
    return _bespec("export", f"{path}:make", "-o", str(out)), out, module.make


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="pt2e runtime: a consumer of a fixed-qparams output (linear after sigmoid) reuses the "
    "fixed qparams, while torchao observes the edge again when the consumer's input qspec "
    "differs from the producer's output qspec; export names aten.linear.default",
)
def test_own_quantizer_with_fixed_and_shared_qspecs_round_trips(tmp_path):
    sys.path.insert(0, str(FIXTURES))
    try:
        import odd
    finally:
        sys.path.remove(str(FIXTURES))
    done, out = _export(
        tmp_path,
        f"{FIXTURES / 'odd.py'}:odd_quantizer",
        "--probe-models",
        f"{FIXTURES / 'odd.py'}:tiny_model",
    )
    assert done.returncode == 0, done.stderr
    assert "verified:" in done.stderr
    text = out.read_text()
    assert "scale_exact_match" in text and "output_share_observer_with_input" in text
    assert _matches(out, odd.odd_quantizer) == []


@pytest.mark.slow
def test_a_quantizer_the_format_cannot_express_is_refused_naming_the_ops(tmp_path):
    done, out = _export(tmp_path, f"{FIXTURES / 'odd.py'}:derived_bias_quantizer")
    assert done.returncode == 1
    assert "aten.conv2d.default" in done.stderr
    assert "its bias is quantized (derived qspec)" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists()


#: Why the XNNPACK exports are refused today. (The cat share groups, which stopped at the
#: producers, now extend through propagated ops as torchao's do; what remains is a slice after
#: a cat that XNNPACK propagates and the inferred spec leaves float, and the elu after it.)
CAT_GROUPS = (
    "export: XNNPACK propagates quantization through aten.slice.Tensor after a cat "
    "(propagate_annotation); the inferred spec leaves that slice float, so its consumer differs"
)


@pytest.mark.slow
@needs_executorch
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
def test_xnnpack_quantizer_exports_and_matches_unseen_models(tmp_path, per_channel):
    """One export per configuration (the slow part). Until the inferred spec propagates
    through slice (CAT_GROUPS) it is refused: the refusal must name the op and write nothing,
    and the test is then an expected failure; once it exports, the spec must match."""
    done, out, original = _export_factory(tmp_path, XNNPACK_FACTORY.format(per_channel=per_channel))
    if done.returncode != 0:
        assert done.returncode == 1, done.stderr
        assert "aten.slice.Tensor" in done.stderr and "nothing was written" in done.stderr
        assert not out.exists()
        pytest.xfail(CAT_GROUPS)
    assert _matches(out, original) == []


@pytest.mark.slow
def test_x86_inductor_quantizer_exports_and_matches_unseen_models(tmp_path):
    done, out, original = _export_factory(tmp_path, X86_FACTORY)
    assert done.returncode == 0, done.stderr
    assert "verified: 8/8 models" in done.stderr
    # X86InductorQuantizer itself raises on resnet18_net (one ReLU module called twice).
    assert _matches(out, original, "resnet18_net") == []


def test_a_refusal_names_each_differing_op_and_the_gaps():
    from backend_spec._torch import BackendConfig
    from backend_spec.cli.render.quantizer_export import render_refusal
    from backend_spec.export.quantizer import QuantizerExport
    from backend_spec.export.quantizer.infer import Gap, Inferred
    from backend_spec.export.quantizer.verify import BranchResult

    gap = Gap("aten.conv2d.default", "its bias is quantized")
    inferred = Inferred(BackendConfig("t"), gaps=[gap])
    model = BranchResult("mlp", {"aten.linear.default": ["linear: out[0.1,3] vs float"]})
    probe_result = BranchResult("alone:aten.cat.default", outputs_equal=False)
    result = QuantizerExport("text", inferred, models=[model], probes=[probe_result])
    assert not result.ok and result.matched == 0
    text = render_refusal(result)
    assert "cannot express the quantizer on 2 ops: aten.linear.default, (outputs)" in text
    assert "mlp: linear: out[0.1,3] vs float" in text
    assert "aten.conv2d.default: its bias is quantized" in text
    assert text.endswith("nothing was written\n")
