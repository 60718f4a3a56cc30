"""The zoo: every model traces, quantizes under the native backend, and is deterministic."""

from __future__ import annotations

import copy

import pytest

from backend_spec._torch import quiet, torch
from backend_spec.check import zoo
from backend_spec.names.vocabulary import builtin_backend_config

with quiet():
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_quantizes_under_native(name: str) -> None:
    model, example_inputs = zoo.MODELS[name]()
    assert not model.training
    torch.fx.symbolic_trace(model)
    bc = builtin_backend_config("native")
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "x86"
    try:
        with quiet():
            for kind, mapping in zoo.mappings_for(name).items():
                prepared = prepare_fx(
                    copy.deepcopy(model), mapping, example_inputs, backend_config=bc
                )
                prepared(*example_inputs)
                quantized = convert_fx(prepared, backend_config=bc)
                out = quantized(*example_inputs)
                assert torch.isfinite(out).all(), (name, kind)
                packages = {type(m).__module__ for m in quantized.modules()}
                assert any(p.startswith("torch.ao.nn.quantized") for p in packages), (name, kind)
    finally:
        torch.backends.quantized.engine = previous


def test_factories_are_deterministic() -> None:
    for name, factory in zoo.MODELS.items():
        (m1, x1), (m2, x2) = factory(), factory()
        assert all(torch.equal(a, b) for a, b in zip(x1, x2, strict=True)), name
        with torch.no_grad():
            assert torch.equal(m1(*x1), m2(*x2)), name


def test_mapping_kinds() -> None:
    assert zoo.mapping_kinds("lstm") == ("dynamic", "fp16")
    assert zoo.mapping_kinds("embedding") == ("weight_only",)
    with pytest.raises(KeyError):
        zoo.mapping_kinds("nope")
