"""pt2e: the spec's torchao Quantizer quantizes like the FX flow under the same spec.

The three reference nets are the judged shapes (tutorial net with the tutorial spec, an
x86-op net and a ResNet-18-shaped net with the x86 spec). The unit tests pin the matcher's
rules: provenance, single-user chains, longest-first, shared observers, fixed qparams,
dynamic and weight-only specs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import backend_spec
from backend_spec._torch import torch

pytest.importorskip("torchao")

from backend_spec.pt2e import flows, nets  # noqa: E402
from backend_spec.pt2e.runtime import TableQuantizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
nn = torch.nn
F = torch.nn.functional
#: Without VNNI, x86's u8s8 int8 kernels add pairs of products in saturating 16-bit (why
#: fbgemm defaults to reduce_range), so a kernel's output is close to the reference, not
#: equal to it: measured here on an AVX2 host, 22 dB for a tutorial net compiled with freezing
#: against its converted model, and a resnet18-shaped net 0.9 dB below FX.
VNNI = torch.cpu._is_vnni_supported()
SATURATED_DB = 20.0


def compare(spec: str, factory) -> flows.Comparison:
    bc = backend_spec.load(SPECS / f"{spec}.yaml")
    return flows.compare("m", bc, lambda: backend_spec.quantizer(SPECS / f"{spec}.yaml"), factory)


@pytest.mark.parametrize(
    ("spec", "net"), [("tutorial", "tutorial_net"), ("x86", "x86_net")], ids=str
)
def test_reference_nets_are_bit_identical(spec: str, net: str) -> None:
    result = compare(spec, nets.NETS[net])
    assert result.fx.quantize_ops > 0
    assert result.max_diff == 0.0
    assert sorted(result.fx.qparams, key=repr) == sorted(result.pt2e.qparams, key=repr)


@pytest.mark.slow
def test_resnet18_shaped_net_matches_fx() -> None:
    """Same tensors quantized with the same qparams; only kernel rounding ties differ."""
    result = compare("x86", nets.resnet18_net)
    assert result.fx.quantize_ops == result.pt2e.quantize_ops == 33
    assert sorted(result.fx.qparams, key=repr) == sorted(result.pt2e.qparams, key=repr)
    assert result.between_db >= flows.EQUIVALENT_DB
    assert result.pt2e_db >= result.fx_db - (0.1 if VNNI else 1.5)


def test_quantizer_is_a_torchao_quantizer_with_a_report() -> None:
    from torchao.quantization.pt2e.quantizer import Quantizer

    quantizer = backend_spec.quantizer(SPECS / "tutorial.yaml")
    assert isinstance(quantizer, Quantizer)
    report = quantizer.report
    assert report.rules == ["nn.Linear", "(nn.Conv2d, nn.ReLU)", "nni.ConvReLU2d"]
    # The entries quantizing the QAT modules are FX's: pt2e QAT fake-quantizes the float graph.
    assert [label for label, _ in report.skipped] == ["nnqat.Linear", "nniqat.ConvReLU2d"]
    assert all("QAT module" in reason for _, reason in report.skipped)
    assert report.conflicts == []


def test_builtin_report_counts() -> None:
    """Pinned: a change in tracing or matching shows up here first."""
    report = backend_spec.quantizer(SPECS / "x86.yaml").report
    assert (len(report.rules), len(report.duplicates), len(report.skipped)) == (149, 13, 30)
    assert report.conflicts == []
    reasons = dict(report.skipped)
    assert "QAT module" in reasons["nnqat.Linear"]
    assert "removes it" in reasons["nn.Identity"]
    assert "linear chain" in reasons["nn.LSTM"]


def test_rules_are_longest_first_then_spec_order() -> None:
    table = backend_spec.quantizer(SPECS / "x86.yaml").table
    lengths = [len(rule["chain"]) for rule in table["rules"]]
    assert lengths == sorted(lengths, reverse=True)
    assert lengths[0] >= 2 and lengths[-1] == 1


def _annotated(model: nn.Module, spec_text: str, *args: torch.Tensor) -> dict[str, bool]:
    """node name -> whether the spec's quantizer gave it an input or output spec."""
    quantizer = backend_spec.quantizer(_write(spec_text))
    graph_module = torch.export.export(model.eval(), args).module()
    quantizer.annotate(graph_module)
    found = {}
    for node in graph_module.graph.nodes:
        annotation = node.meta.get("quantization_annotation")
        if node.op == "call_function":
            found[node.name] = bool(
                annotation and (annotation.input_qspec_map or annotation.output_qspec)
            )
    return found


_COUNTER = iter(range(10**6))
#: The specs this module writes, removed with the run.
_FOLDER = tempfile.TemporaryDirectory(prefix="bespec-pt2e-")


def _write(text: str) -> Path:
    path = Path(_FOLDER.name) / f"spec{next(_COUNTER)}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


RELU_MODULE_ONLY = """
    name: relu_module
    dtype_configs:
      q: {input_dtype: quint8, output_dtype: quint8}
    patterns:
      - pattern: nn.ReLU
        dtype_configs: [q]
"""


class TwoRelus(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.relu(x))


def test_provenance_module_versus_functional() -> None:
    found = _annotated(TwoRelus(), RELU_MODULE_ONLY, torch.randn(2, 4))
    assert found == {"relu": True, "relu_1": False}


CONV_RELU = """
    name: conv_relu
    dtype_configs:
      w: {input_dtype: quint8, output_dtype: quint8, weight_dtype: qint8, bias_dtype: float}
    patterns:
      - pattern: [nn.Conv2d, nn.ReLU]
        dtype_configs: [w]
      - pattern: nn.Conv2d
        dtype_configs: [w]
"""


class ConvTwoUsers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.relu = nn.Conv2d(3, 4, 1), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.relu(y) + y


def test_chain_needs_a_single_user_and_explain_says_why() -> None:
    model, x = ConvTwoUsers().eval(), torch.randn(1, 3, 4, 4)
    found = _annotated(model, CONV_RELU, x)
    assert found["conv2d"] is True  # matched alone by nn.Conv2d
    assert found["relu"] is False  # the (conv, relu) chain is broken by the second user
    quantizer = backend_spec.quantizer(_write(CONV_RELU))
    verdicts = {v.node: v for v in quantizer.explain(torch.export.export(model, (x,)).module())}
    assert "2 users" in verdicts["relu"].reason
    assert verdicts["conv2d"].rule == "nn.Conv2d"


def test_cat_inputs_and_producers_share_one_observer() -> None:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    model, (x,) = nets.x86_net()
    quantizer = backend_spec.quantizer(SPECS / "x86.yaml")
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    cat = next(n for n in prepared.graph.nodes if n.target == torch.ops.aten.cat.default)
    observers = {id(getattr(prepared, arg.target)) for arg in cat.args[0]}
    observers.add(id(getattr(prepared, next(iter(cat.users)).target)))
    assert len(observers) == 1


def test_fixed_qparams_for_sigmoid() -> None:
    result = compare("x86", nets.x86_net)
    assert (0.00390625, 0) in result.pt2e.qparams


DYNAMIC = """
    name: dynamic_linear
    patterns:
      - pattern: nn.Linear
        dtype_configs:
          - {input_dtype: quint8, output_dtype: float, weight_dtype: qint8, is_dynamic: true}
"""

WEIGHT_ONLY = """
    name: weight_only
    patterns:
      - pattern: nn.Embedding
        dtype_configs:
          - {input_dtype: float, output_dtype: float, weight_dtype: quint8}
        root_module: nn.Embedding
        reference_quantized_module: nnqr.Embedding
"""

FP16 = """
    name: fp16
    patterns:
      - pattern: nn.Linear
        dtype_configs:
          - {input_dtype: float16, output_dtype: float16, weight_dtype: float16}
"""


def test_dynamic_spec_quantizes_inputs_at_run_time() -> None:
    table = backend_spec.quantizer(_write(DYNAMIC)).table
    spec = table["specs"][table["rules"][0]["input"]]
    assert spec["is_dynamic"] and table["rules"][0]["output"] is None

    def model() -> tuple[nn.Module, tuple[torch.Tensor]]:
        torch.manual_seed(0)  # the same weights and inputs whatever ran before in the process
        return nn.Sequential(nn.Linear(8, 4)).eval(), (torch.randn(3, 8),)

    result = flows.compare(
        "mlp",
        backend_spec.load(_write(DYNAMIC)),
        lambda: backend_spec.quantizer(_write(DYNAMIC)),
        model,
    )
    assert None in result.pt2e.qparams  # a dynamic quantize (choose_qparams at run time)
    assert result.between_db >= flows.EQUIVALENT_DB


def test_dynamic_qparams_compare_equal_and_describe_without_a_crash() -> None:
    """Run-time qparams (choose_qparams nodes) are the same "dynamic" in two conversions of
    one model, and a difference against a float node still renders."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from backend_spec.pt2e.compare import placement, placement_differences

    def converted():
        torch.manual_seed(0)
        model, x = nn.Sequential(nn.Linear(8, 4)).eval(), torch.randn(3, 8)
        exported = torch.export.export(model, (x,)).module()
        prepared = prepare_pt2e(exported, backend_spec.quantizer(_write(DYNAMIC)))
        prepared(x)
        return placement(convert_pt2e(prepared, fold_quantize=False))

    first, second = converted(), converted()
    assert any("dynamic" in entry[-1] for entries in first.values() for entry in entries)
    assert placement_differences(first, second) == []
    floated = {name: [] for name in second}
    assert all("[dynamic]" in line for line in placement_differences(first, floated))


def test_weight_only_and_fp16_specs() -> None:
    table = backend_spec.quantizer(_write(WEIGHT_ONLY)).table
    rule = table["rules"][0]
    assert (rule["input"], rule["output"]) == (None, None)
    weight = table["specs"][rule["weight"]]
    assert weight["qscheme"] == "per_channel_affine_float_qparams" and weight["ch_axis"] == 0
    fp16 = backend_spec.quantizer(_write(FP16)).table
    assert {spec["dtype"] for spec in fp16["specs"].values()} == {"float16"}


def test_a_weight_only_rule_quantizes_the_weight_alone() -> None:
    """Float input and output, quantized weight (FX's weight-only): the embedding's weight is
    quantized and dequantized, nothing else is."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, x = nn.Sequential(nn.Embedding(10, 8)).eval(), torch.randint(0, 10, (2, 5))
    exported = torch.export.export(model, (x,)).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(_write(WEIGHT_ONLY)))
    prepared(x)
    converted = convert_pt2e(prepared, fold_quantize=False)
    quantized = [
        str(n.args[0])
        for n in converted.graph.nodes
        if n.op == "call_function" and str(n.target).startswith("quantized_decomposed.q")
    ]
    assert quantized and all("weight" in name for name in quantized)


def test_module_weights_stay_float_without_a_reference_module() -> None:
    """As in FX, which only quantizes weights of modules it swaps for reference modules."""
    text = WEIGHT_ONLY.replace("        root_module: nn.Embedding\n", "")
    rule = backend_spec.quantizer(_write(text)).table["rules"][0]
    assert rule["weight"] is None


def test_quantizer_from_a_backend_config() -> None:
    bc = backend_spec.load(SPECS / "tutorial.yaml")
    assert isinstance(backend_spec.quantizer(bc), TableQuantizer)


def _blocking(package: str) -> str:
    """Script lines that make importing ``package`` (and its submodules) fail."""
    return textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == {package!r} or name.startswith({package + "."!r}):
                    raise ImportError("blocked")
        sys.meta_path.insert(0, Block())
        """
    )


def test_without_torchao_everything_else_works() -> None:
    """torchao blocked on import: load works, quantizer raises one clear error."""
    script = _blocking("torchao") + textwrap.dedent(
        f"""
        import backend_spec
        backend_spec.load({str(SPECS / "tutorial.yaml")!r})
        try:
            backend_spec.quantizer({str(SPECS / "tutorial.yaml")!r})
        except backend_spec.pt2e.TorchaoMissing as exc:
            print("ERR", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "ERR the pt2e flow needs torchao" in done.stdout
    assert "backend-spec[pt2e]" in done.stdout
    assert "Traceback" not in done.stderr


def test_import_keeps_torchao_noise_out() -> None:
    script = "import backend_spec; backend_spec.quantizer('specs/tutorial.yaml')"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Failed to load" not in done.stderr + done.stdout


@pytest.mark.slow
def test_aten_table_is_current() -> None:
    """``make aten-table`` output equals the packaged table of this torch minor version (every
    supported version has one, whatever its build tag)."""
    from backend_spec.pt2e import aten

    packaged = aten.table_path().read_text(encoding="utf-8")
    assert aten.table_text() == packaged, f"run `make aten-table TORCH={torch.__version__}`"


def test_compiled_module_needs_only_torch_and_torchao(tmp_path: Path) -> None:
    """``bespec compile --target pt2e -o``: importable with bespec blocked, same results."""
    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    out = tmp_path / "quantizer.py"
    done = CliRunner().invoke(
        app, ["compile", str(SPECS / "x86.yaml"), "--target", "pt2e", "-o", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert "pt2e: 149 rules" in done.output
    script = _blocking("backend_spec") + textwrap.dedent(
        f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("quantizer", {str(out)!r})
        module = sys.modules["quantizer"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        import torch
        sys.path.insert(0, {str(ROOT)!r})
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
        x = torch.randn(1, 3, 8, 8)
        prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), module.get_quantizer())
        prepared(x)
        torch.save(convert_pt2e(prepared)(x), {str(tmp_path / "out.pt")!r})
        print("backend_spec" in sys.modules)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    live = backend_spec.quantizer(SPECS / "x86.yaml")
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), live)
    prepared(x)
    assert torch.equal(convert_pt2e(prepared)(x), torch.load(tmp_path / "out.pt"))


VERSION_2 = """
    spec_version: 2
    name: v2
    dtype_configs:
      w:
        input_dtype: {dtype: quint8, observer: moving_average_minmax}
        output_dtype: {dtype: quint8, observer: moving_average_minmax}
        weight_dtype: {dtype: qint8, granularity: per_channel, ch_axis: 0}
        bias_dtype: float
    patterns:
      - pattern: [nn.Conv2d, nn.ReLU]
        dtype_configs: [w]
        fused_module: nni.ConvReLU2d
        fuser_method: {sequential: nni.ConvReLU2d}
      - pattern: nni.ConvReLU2d
        dtype_configs: [w]
      - pattern: nn.Linear
        dtype_configs: [w]
      - pattern: nn.MaxPool2d
        observation_type: output_share_observer_with_input
        dtype_configs: [{input_dtype: quint8, output_dtype: quint8}]
        quantize: if_input_quantized
        aten: [[[aten.max_pool2d.default, aten.max_pool2d_with_indices.default]]]
"""


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_version_2_keys_round_trip(fmt: str) -> None:
    text = backend_spec.dump(backend_spec.load(_write(VERSION_2)), format=fmt)
    assert ("spec_version: 2" if fmt == "yaml" else "spec_version = 2") in text
    assert "granularity" in text and "if_input_quantized" in text and "max_pool2d_with" in text
    assert backend_spec.dump(backend_spec.loads(text, format=fmt), format=fmt) == text


def test_version_1_files_dump_as_version_1() -> None:
    text = backend_spec.dump(backend_spec.load(SPECS / "tutorial.yaml"))
    assert "spec_version: 1" in text and "observer" not in text


def test_version_2_observers_reach_fx_and_pt2e_alike() -> None:
    """Per-channel weights and moving-average observers in both flows, same result."""
    from torch.ao.quantization.observer import PerChannelMinMaxObserver

    path = _write(VERSION_2)
    qconfig = backend_spec.qconfig_mapping(path).object_type_qconfigs[nn.Linear]
    assert qconfig.weight.p.func is PerChannelMinMaxObserver
    result = flows.compare(
        "tutorial_net",
        backend_spec.load(path),
        lambda: backend_spec.quantizer(path),
        nets.tutorial_net,
    )
    assert result.fx.quantize_ops == result.pt2e.quantize_ops > 0
    # Same tensors, same qparams; per-channel weight rounding differs between the kernels.
    assert sorted(result.fx.qparams, key=repr) == sorted(result.pt2e.qparams, key=repr)
    assert result.between_db >= flows.EQUIVALENT_DB


class PoolTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool, self.conv, self.relu = nn.MaxPool2d(2), nn.Conv2d(3, 3, 1), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.conv(self.pool(x))))


def test_quantize_if_input_quantized() -> None:
    found = _annotated(PoolTwice(), VERSION_2, torch.randn(1, 3, 8, 8))
    assert found["max_pool2d"] is False  # reads the float model input
    assert found["max_pool2d_1"] is True  # reads the quantized conv-relu output


MODELS_MODULE = """
import torch

def small():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 2)
    )
    return model.eval(), (torch.randn(1, 3, 8, 8),)
"""


def test_explain_flow_pt2e(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    (tmp_path / "pt2e_models.py").write_text(MODELS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    done = CliRunner().invoke(
        app,
        ["explain", str(SPECS / "tutorial.yaml"), "--model", "pt2e_models:small", "--flow", "pt2e"],
    )
    assert done.exit_code == 0, done.output
    assert "relu (aten.relu.default): (nn.Conv2d, nn.ReLU): annotated" in done.output
    assert "flatten (aten.flatten.using_ints): not annotated: no rule" in done.output


@pytest.mark.slow
def test_check_flow_both_json() -> None:
    import json

    from typer.testing import CliRunner

    from backend_spec.cli.app import app

    done = CliRunner().invoke(
        app, ["check", str(SPECS / "tutorial.yaml"), "--flow", "both", "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    rows = {row["model"]: row for row in json.loads(done.output)["models"]}
    assert rows["tutorial_net"]["identical"] is True
    assert rows["conv2d_bn_relu"]["classes"] == ["bn_folding"]
    assert all(row["ok"] for row in rows.values())


@pytest.mark.slow
def test_torch_compile_with_freezing_runs_the_pt2e_result_on_cpu() -> None:
    """With per-channel weights (version 2), inductor lowers the pt2e model to onednn
    quantized kernels (torchao's x86 inductor passes); the output is unchanged.

    Importing torchao's x86 inductor quantizer module is what installs its lowering passes
    (the weight-pack pass and the ``pre_grad_custom_pass``): torch 2.13 lowered to int8 kernels
    with ``inductor_passes.x86`` alone, torch 2.14 only once that module is imported, as any
    user of torchao's x86 flow has it."""
    import torch._inductor.config as inductor_config
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # noqa: F401  (passes)
    from torch._inductor.utils import run_and_get_code

    text = (SPECS / "tutorial.yaml").read_text(encoding="utf-8")
    text = text.replace("spec_version: 1", "spec_version: 2").replace(
        "weight_dtype: qint8", "weight_dtype: {dtype: qint8, granularity: per_channel}"
    )
    path = _write(text)
    model, inputs = nets.tutorial_net()
    quantized = flows.run_pt2e(
        backend_spec.quantizer(path), model, inputs, flows.calibration(inputs)
    )
    previous = inductor_config.freezing
    inductor_config.freezing = True
    try:
        with torch.no_grad():
            output, code = run_and_get_code(torch.compile(quantized.model), *inputs)
    finally:
        inductor_config.freezing = previous
    assert "onednn.qconv_pointwise" in "".join(code)
    assert "onednn.qlinear_pointwise" in "".join(code)
    assert flows.sqnr(quantized.output, output) >= (flows.EQUIVALENT_DB if VNNI else SATURATED_DB)
