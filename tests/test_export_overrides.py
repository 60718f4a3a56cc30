"""Export of per-type overrides of X86InductorQuantizer and XNNPACKQuantizer (issue 30): a
module, function or operator type given its own config or left float beside the global one
(fixtures/quantizers/overrides.py), and X86's flatten before a consumer it leaves float.

Fast tests build the consumer probes and feed inference hand-made probe data; the slow one
exports each config through the CLI, once, and compares the spec with the original on models
the export never saw.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

from _export_helpers import FIXTURES, export, fixture, observed  # noqa: E402

from backend_spec.export.quantizer import _before_consumers, probe  # noqa: E402
from backend_spec.export.quantizer.infer import infer  # noqa: E402
from backend_spec.ir.lower import backend_of  # noqa: E402

FLATTEN, MATMUL = "aten.flatten.using_ints", "aten.matmul.default"

ACT = observed(dtype="uint8", quant_min=0, quant_max=255)
SHARED = {"kind": "shared", "with": "input:0"}


def _fixtures():
    return fixture("overrides"), fixture("unseen")


def _op(target, inputs=None, output=None, annotated=None):
    inputs = inputs or {}
    if annotated is None:
        annotated = bool(inputs) or output is not None
    return {
        "target": target,
        "inputs": inputs,
        "kinds": {"0": "act"},
        "output": output,
        "annotated": annotated,
    }


def _unit(ops, post=()):
    return {"ops": ops, "pre": [], "post": list(post)}


def _flatten_probes(consumer_units: dict) -> dict:
    """X86-like flatten: float alone and after a quantized producer, annotated between a
    quantized producer and a quantized Linear; ``consumer_units``: the consumer probes."""
    flat = _op(FLATTEN, {"0": ACT}, SHARED)
    linear = _op("aten.linear.default", {"0": ACT})
    return {
        "alone": {FLATTEN: _unit([_op(FLATTEN)])},
        "pre": {FLATTEN: _unit([_op(FLATTEN)])},
        "pre_post": {FLATTEN: _unit([flat], [linear])},
        probe.CONSUMER_CONTEXT: consumer_units,
    }


def test_an_op_annotated_only_before_a_consumer_is_probed_before_each_reader():
    """Flatten (annotated only between quantized ops) is what the consumer probes are for;
    they read its output with every single op that can, a matmul with its transpose."""
    probed = _flatten_probes({})
    assert _before_consumers(probed) == {FLATTEN}
    parts = probe.SuiteParts()
    probe.consumer_parts(parts, {FLATTEN}, linear=True)
    by_unit = dict(zip([b.unit for b in parts.branches], parts.modules, strict=True))
    assert {b.context for b in parts.branches} == {probe.CONSUMER_CONTEXT}
    assert f"{FLATTEN}>{MATMUL}" in by_unit and f"{FLATTEN}>aten.relu.default" in by_unit
    assert all(key.startswith(f"{FLATTEN}>") for key in by_unit)
    matmul = by_unit[f"{FLATTEN}>{MATMUL}"]
    assert matmul.post.transposed and isinstance(matmul.pre[0], probe.nn.Linear)
    # A consumer that cannot read a flattened output (a Conv2d) is not probed.
    assert f"{FLATTEN}>aten.conv2d.default" not in by_unit


@pytest.mark.parametrize(
    ("flatten_annotated", "consumers", "matmul_entry"),
    [(True, "quantizable", True), (False, "quantizing", False)],
    ids=["quantized_before_a_float_matmul", "float_before_it"],
)
def test_a_float_consumer_that_counts_makes_consumers_quantizable(
    flatten_annotated, consumers, matmul_entry
):
    """X86 quantizes a flatten before a matmul of its default recipe (left float, not even
    claimed): ``consumers: quantizable`` (version 8), with a float entry for matmul so that
    the spec names its op. A quantizer that leaves the flatten float there keeps
    ``quantizing`` and writes no matmul entry."""
    flat = _op(FLATTEN, {"0": ACT}, SHARED) if flatten_annotated else _op(FLATTEN)
    consumer = {f"{FLATTEN}>{MATMUL}": _unit([flat], [_op("aten.mT.default"), _op(MATMUL)])}
    names = {FLATTEN: ("torch.flatten",), MATMUL: ("torch.matmul",)}
    inferred = infer(_flatten_probes(consumer), names, "t")
    by_op = {entry.aten[0][0][0]: entry for entry in backend_of(inferred.backend_config)}
    assert dict(by_op[FLATTEN].policy)["consumers"] == consumers
    assert (MATMUL in by_op) is matmul_entry
    if matmul_entry:
        (config,) = by_op[MATMUL].dtype_configs
        assert config.mapping("input_dtype").dtype == probe.torch.float


CONV_RELU = "nn.Conv2d>nn.ReLU"
CALLED = f"{CONV_RELU}@F.conv2d>F.relu"
INT8 = {**ACT, "dtype": "int8", "quant_min": -128, "quant_max": 127}
WEIGHT = {
    **INT8,
    "qscheme": "per_tensor_symmetric",
    "quant_min": -127,
    "observer": "MinMaxObserver",
}


def test_a_fusion_called_as_functions_is_spelled_with_functions_throughout():
    """Conv + ReLU written with functions throughout (BatchNorm chains aside), a unit the
    probe suite runs."""
    assert probe.functional_chain(("nn.Conv2d", "nn.ReLU")) == ("F.conv2d", "F.relu")
    assert probe.functional_chain(("nn.Conv2d", "nn.BatchNorm2d")) == (
        "nn.Conv2d",
        "nn.BatchNorm2d",
    )
    assert any(unit.names == ("F.conv2d", "F.relu") for unit in probe.units())


def _conv(annotated: bool) -> dict:
    if not annotated:
        return _op("aten.conv2d.default")
    return {
        "target": "aten.conv2d.default",
        "inputs": {"0": INT8, "1": WEIGHT},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
        "annotated": True,
    }


@pytest.mark.parametrize("chain_probed", [True, False], ids=["called_chain", "single_ops_only"])
def test_a_chain_whose_first_op_is_left_float_when_called_is_matched_as_a_module(chain_probed):
    """X86 and Arm's inductor quantizer leave a called conv float, the nn.Conv2d + nn.ReLU
    chain fused (the relu spelled either way). One ATen entry would quantize F.conv2d +
    F.relu too: each entry starts with the module, its relu in every spelling. The single
    ops' probes alone say so (a chain with a BatchNorm has no called probe)."""
    fused = _unit([_conv(True), _op("aten.relu.default", output=INT8)])
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([_conv(True)]),
            "aten.conv2d.default@F.conv2d": _unit([_conv(False)]),
            CONV_RELU: fused,
            f"{CONV_RELU}@nn.Conv2d>F.relu": fused,
        }
    }
    names = {
        "aten.conv2d.default": ("nn.Conv2d",),
        "aten.conv2d.default@F.conv2d": ("F.conv2d",),
        CONV_RELU: ("nn.Conv2d", "nn.ReLU"),
        f"{CONV_RELU}@nn.Conv2d>F.relu": ("nn.Conv2d", "F.relu"),
    }
    if chain_probed:
        probed["alone"][CALLED] = _unit([_conv(False), _op("aten.relu.default")])
        names[CALLED] = ("F.conv2d", "F.relu")
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    chains = [e.get("pattern") for e in entries if isinstance(e.get("pattern"), tuple)]
    torch = probe.torch
    assert chains and all(p[0] is torch.nn.Conv2d for p in chains)
    assert {getattr(p[1], "__name__", p[1]) for p in chains} >= {"relu", "ReLU"}
    assert not any(e.aten for e in entries if isinstance(e.get("pattern"), tuple))


@pytest.mark.parametrize("module_fused", [False, True], ids=["module_float", "module_fused"])
def test_a_chain_fused_only_when_called_as_functions_gets_an_entry_of_that_spelling(
    module_fused,
):
    """XNNPACK with set_module_type(nn.Conv2d, None) fuses F.conv2d + F.relu with its global
    config and leaves nn.Conv2d + nn.ReLU float: the chain's entry is spelled with the
    functions (matched only so), not its ATen chain. When both spellings fuse alike, one
    entry matches however the chain is written."""
    conv = {
        "target": "aten.conv2d.default",
        "inputs": {"0": INT8, "1": WEIGHT},
        "kinds": {"0": "act", "1": "param"},
        "output": None,
        "annotated": True,
    }
    relu = _op("aten.relu.default", output=INT8)
    fused = _unit([conv, relu])
    bare = _unit([_op("aten.conv2d.default"), _op("aten.relu.default")])
    probed = {"alone": {CONV_RELU: fused if module_fused else bare, CALLED: fused}}
    names = {CONV_RELU: ("nn.Conv2d", "nn.ReLU"), CALLED: ("F.conv2d", "F.relu")}
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    functional = probe.torch.nn.functional
    if module_fused:  # one entry, matched through its ATen chain
        (entry,) = entries
        assert entry.aten
        return
    # The conv matched as called, the relu however it is written.
    torch = probe.torch
    patterns = {entry.get("pattern") for entry in entries if not entry.aten}
    relus = (functional.relu, torch.relu, "relu", torch.nn.ReLU)
    assert len(patterns) == len(entries) == 4
    assert all(p[0] is functional.conv2d for p in patterns)
    assert {getattr(p[1], "__name__", p[1]) for p in patterns} == {
        getattr(r, "__name__", r) for r in relus
    }


def test_a_called_chain_left_float_where_its_first_op_alone_is_quantized_gets_a_float_entry():
    """XNNPACK with a dynamic global config and a static ``set_module_type(nn.Conv2d, ...)``:
    nn.Conv2d + nn.ReLU fused statically, F.conv2d quantized dynamically alone but left float
    before a relu (its ``_do_annotate_conv``). The called chain gets float entries of its own
    spelling, which claim the conv before F.conv2d's dynamic entry; the module chain keeps its
    fused one."""
    dynamic = {**INT8, "is_dynamic": True, "observer": "PlaceholderObserver"}
    called_conv = {**_conv(True), "inputs": {"0": dynamic, "1": WEIGHT}}
    probed = {
        "alone": {
            "aten.conv2d.default": _unit([{**_conv(True), "output": INT8}]),
            "aten.conv2d.default@F.conv2d": _unit([called_conv]),
            "aten.relu.default": _unit([_op("aten.relu.default")]),
            CONV_RELU: _unit([_conv(True), _op("aten.relu.default", output=INT8)]),
            CALLED: _unit([_conv(False), _op("aten.relu.default")]),
        }
    }
    names = {
        "aten.conv2d.default": ("nn.Conv2d",),
        "aten.conv2d.default@F.conv2d": ("F.conv2d",),
        "aten.relu.default": ("nn.ReLU",),
        CONV_RELU: ("nn.Conv2d", "nn.ReLU"),
        CALLED: ("F.conv2d", "F.relu"),
    }
    entries = backend_of(infer(probed, names, "t").backend_config).entries
    functional, torch = probe.torch.nn.functional, probe.torch
    chains = {e.get("pattern"): e for e in entries if isinstance(e.get("pattern"), tuple)}
    called = [e for p, e in chains.items() if p[0] is functional.conv2d]
    assert called and not any(e.aten for e in called)
    assert {getattr(p[1], "__name__", p[1]) for p in chains if p[0] is functional.conv2d} >= {
        "relu",
        "ReLU",
    }
    for entry in called:
        (config,) = entry.dtype_configs
        assert config.mapping("input_dtype").dtype == torch.float
    modules = [e for p, e in chains.items() if p[0] is torch.nn.Conv2d]
    assert modules
    assert all(e.dtype_configs[0].mapping("input_dtype").dtype != torch.float for e in modules)


# --- slow: one CLI export per config --------------------------------------------------------

#: factory -> (needs executorch, text the spec must have).
CONFIGS = {
    "x86_default": (False, "consumers: quantizable"),
    "x86_float_conv": (False, ""),
    "x86_reduce_range_conv": (False, ""),
    "x86_per_tensor_conv": (False, ""),
    "x86_function_linear_reduce_range": (False, ""),
    "x86_function_linear_float": (False, ""),
    "x86_matmul": (False, ""),
    "x86_per_tensor": (False, ""),
    # One conv + relu entry for every spelling, as before the called spelling was probed.
    "xnnpack_default": (True, "aten: [[aten.conv2d.default, [aten.relu.default"),
    "xnnpack_float_conv": (True, ""),
    "xnnpack_dynamic_conv": (True, ""),
    "xnnpack_per_channel_conv": (True, ""),
    "xnnpack_operator_linear_float": (True, ""),
    "xnnpack_operator_linear_per_channel": (True, ""),
    "xnnpack_operator_conv_dynamic": (True, ""),
    "xnnpack_per_channel_linear": (True, ""),
    # A called conv stays float: its chains start with the module, matched as such.
    "arm_inductor_default": (False, "pattern: [nn.Conv2d, F.relu]"),
}


def _models():
    """Models the export never saw: the parity nets, fixtures/quantizers/unseen.py's, and
    flatten before a matmul or a scalar mul (ResNet-18 is left out: X86 raises on it)."""
    from backend_spec.pt2e import parity_nets

    overrides, unseen = _fixtures()
    return [*parity_nets.PARITY_NETS.items(), *unseen.UNSEEN, *overrides.MODELS]


#: The configs the slow test exports (one export and ~25 comparisons each, minutes on two
#: cores): one per kind of override; the others share their code paths.
SLOW_CONFIGS = (
    "x86_float_conv",
    "x86_function_linear_float",
    "xnnpack_float_conv",
    "xnnpack_per_channel_linear",
    "arm_inductor_default",
)


@pytest.mark.slow
@pytest.mark.parametrize("factory", SLOW_CONFIGS)
def test_a_per_type_override_exports_verifies_and_matches_unseen_models(tmp_path, factory):
    import backend_spec
    from backend_spec.pt2e.compare import compare_quantizers

    executorch, line = CONFIGS[factory]
    if executorch and importlib.util.find_spec("executorch") is None:
        pytest.skip("executorch cannot be imported")
    done, out = export(tmp_path, f"{FIXTURES / 'overrides.py'}:{factory}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    assert line in out.read_text()
    original = getattr(_fixtures()[0], factory)
    results = compare_quantizers(original, lambda: backend_spec.quantizer(out), _models())
    assert [f"{r.name}: {d}" for r in results for d in r.differences] == []


def test_module_names_a_quantizer_configures_are_found():
    """set_module_name configures modules of the caller's model by name: XNNPACK's and
    torchao's spellings of it, inside a ComposableQuantizer too."""
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer

    from backend_spec.export.quantizer import _named_modules

    overrides = _fixtures()[0]
    assert _named_modules(overrides.x86_module_name()) == ["features.0"]
    assert _named_modules(overrides.x86_default()) == []
    composed = ComposableQuantizer([overrides.x86_default(), overrides.x86_module_name()])
    assert _named_modules(composed) == ["features.0"]
    if importlib.util.find_spec("executorch") is not None:
        assert _named_modules(overrides.xnnpack_module_name()) == ["fc"]
        assert _named_modules(overrides.xnnpack_default()) == []


def test_a_quantizer_configuring_modules_by_name_is_not_verified(tmp_path):
    """No probe has the caller's module names, so the spec matches everywhere and would say
    "verified" while a model with a module called ``features.0`` differs: export refuses
    before probing, naming the modules, and writes nothing."""
    done, out = export(tmp_path, f"{FIXTURES / 'overrides.py'}:x86_module_name")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "set_module_name: 'features.0'" in done.stderr
    assert not out.exists()
