"""Behavioural equivalence: the checked-in spec of each built-in backend quantizes the zoo
models exactly as torch's own BackendConfig does (same generated code, modules and outputs).

This is the test that the round trip is not just structurally equal but means the same thing
to ``prepare_fx``/``convert_fx``. Reference conversion runs for all seven backends; lowered
conversion (real quantized kernels) for the backends whose engines run on this host's CPU.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import backend_spec
from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.analysis.qconfigs import qconfig_mapping
from backend_spec.check import zoo
from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config

with quiet():
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

pytestmark = pytest.mark.slow

SPECS = Path(__file__).resolve().parent.parent / "specs"

#: Backends whose own engine runs lowered (``convert_fx``) models on an x86 CPU, and whose
#: static models are quantized with torch's default QConfigMapping for that engine.
HOST_ENGINES = ("x86", "fbgemm")


@functools.cache
def configs(backend: str) -> tuple[BackendConfig, BackendConfig]:
    """(torch's built-in config, the config compiled from ``specs/<backend>.yaml``)."""
    return builtin_backend_config(backend), backend_spec.load(SPECS / f"{backend}.yaml")


@functools.cache
def static_mapping(backend: str) -> Any:
    """torch's defaults on host engines; elsewhere a mapping the backend honours (qconfigs)."""
    if backend in HOST_ENGINES:
        return zoo.make_mapping("static", backend)
    return qconfig_mapping(builtin_backend_config(backend))


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


def quantize(bc: BackendConfig, model_name: str, qmap: Any, reference: bool) -> dict[str, Any]:
    """Prepare, calibrate once, convert; what the result looks like and computes."""
    model, inputs = zoo.MODELS[model_name]()
    with quiet(), torch.no_grad():
        prepared = prepare_fx(model, qmap, inputs, backend_config=bc)
        prepared(*inputs)
        convert = convert_to_reference_fx if reference else convert_fx
        gm = convert(prepared, backend_config=bc)
        output = gm(*inputs)
    return {
        "code": gm.code,
        "modules": [
            (name, type(m).__module__, type(m).__qualname__) for name, m in gm.named_modules()
        ],
        "output": output,
    }


def assert_same_outputs(a: Any, b: Any) -> None:
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same_outputs(x, y)
    else:
        assert torch.equal(a, b)


CASES = [
    (backend, model, kind, reference)
    for backend in BUILTIN_BACKENDS
    for model in zoo.MODELS
    for kind in zoo.mapping_kinds(model)
    for reference in ((True, False) if backend in HOST_ENGINES else (True,))
]


@pytest.mark.parametrize(
    ("backend", "model", "kind", "reference"),
    CASES,
    ids=[f"{b}-{m}-{k}-{'ref' if r else 'lowered'}" for b, m, k, r in CASES],
)
def test_spec_quantizes_like_torchs_backend_config(
    backend: str, model: str, kind: str, reference: bool
) -> None:
    torch_bc, spec_bc = configs(backend)
    qmap = static_mapping(backend) if kind == "static" else zoo.make_mapping(kind)
    with engine(backend if backend in HOST_ENGINES else "x86"):
        expected = quantize(torch_bc, model, qmap, reference)
        got = quantize(spec_bc, model, qmap, reference)
    assert got["code"] == expected["code"]
    assert got["modules"] == expected["modules"]
    assert_same_outputs(got["output"], expected["output"])


def test_equivalence_cases_actually_quantize() -> None:
    """Guard against a vacuous pass: this setup really produces quantized code and modules."""
    torch_bc, _ = configs("x86")
    result = quantize(torch_bc, "conv2d_bn_relu", static_mapping("x86"), reference=False)
    assert "quantize_per_tensor" in result["code"]
    assert any("quantized" in module for _, module, _ in result["modules"])
