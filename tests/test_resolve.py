"""Resolver stage: aliases, kinds, suggestions, and the allowed-roots rule."""

from __future__ import annotations

import operator
import subprocess
import sys

import pytest
import torch
from torch.ao.quantization.fuser_method_mappings import fuse_conv_bn
from torch.ao.quantization.utils import MatchAllNode

from backend_spec.names.resolver import Kind, NameProblem, Resolver


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("nn.Conv2d", Kind.MODULE, torch.nn.Conv2d),
        ("torch.nn.modules.conv.Conv2d", Kind.MODULE, torch.nn.Conv2d),
        ("nni.ConvReLU2d", Kind.MODULE, torch.ao.nn.intrinsic.ConvReLU2d),
        ("nnqd.Linear", Kind.MODULE, torch.ao.nn.quantized.dynamic.Linear),
        ("F.relu", Kind.OP, torch.nn.functional.relu),
        ("operator.add", Kind.OP, operator.add),
        ("method:reshape", Kind.OP, "reshape"),
        ("MatchAllNode", Kind.COMPLEX_OP, MatchAllNode),
        ("fuse_conv_bn", Kind.FUNCTION, fuse_conv_bn),
    ],
)
def test_names_resolve(name, kind, expected):
    assert Resolver().resolve(name, kind) == expected


@pytest.mark.parametrize(
    ("name", "kind", "code", "text"),
    [
        ("nn.Conv2D", Kind.MODULE, "BS300", "nn.Conv2d"),
        ("F.rellu", Kind.OP, "BS300", "F.relu"),
        ("fuse_conv_bm", Kind.FUNCTION, "BS300", "fuse_conv_bn"),
        ("F.relu", Kind.MODULE, "BS303", "nn.Module subclass"),
        ("nn.Conv2d", Kind.FUNCTION, "BS303", "function"),
        ("MatchAllNode", Kind.OP, "BS303", "op"),
        ("method:view", Kind.MODULE, "BS303", "nn.Module"),
        ("torch.os.system", Kind.FUNCTION, "BS302", "'os'"),
        ("os.system", Kind.FUNCTION, "BS302", "allowed roots"),
        ("torch.nn.modules.module.OrderedDict", Kind.OP, "BS302", "collections"),
        ("nn..Conv2d", Kind.MODULE, "BS301", "dotted"),
        ("nn.Conv2d.__init__.__globals__", Kind.FUNCTION, "BS301", "dunder"),
        ("nn.Module.__subclasses__", Kind.FUNCTION, "BS301", "dunder"),
        ("nn.Conv2d.forward.x", Kind.FUNCTION, "BS301", "not a module or class"),
    ],
)
def test_bad_names_are_refused_with_a_reason(name, kind, code, text):
    with pytest.raises(NameProblem) as info:
        Resolver().resolve(name, kind)
    assert info.value.code == code
    assert text in info.value.message + (info.value.hint or "")


def test_allow_list_admits_only_the_named_module_and_its_submodules():
    resolver = Resolver(["bespec_custom_fusers"])
    assert callable(resolver.resolve("bespec_custom_fusers.fuse_linear_relu", Kind.FUNCTION))
    # through the package's own reference to a torch module: still inside the roots
    assert resolver.resolve("bespec_custom_fusers.nni.LinearReLU", Kind.MODULE) is (
        torch.ao.nn.intrinsic.LinearReLU
    )
    with pytest.raises(NameProblem) as info:
        resolver.resolve("bespec_custom_fusers_extra.fuse", Kind.FUNCTION)
    assert info.value.code == "BS302"
    with pytest.raises(NameProblem) as info:
        Resolver().resolve("bespec_custom_fusers.fuse_linear_relu", Kind.FUNCTION)
    assert info.value.code == "BS302"


def test_refused_names_import_nothing():
    code = (
        "import sys; from backend_spec.names.resolver import Resolver, Kind, NameProblem\n"
        "for n in ['subprocess.run', 'json.loads', 'torch._dynamo.config', 'torch.onnx.export']:\n"
        "    try: Resolver().resolve(n, Kind.FUNCTION)\n"
        "    except NameProblem: pass\n"
        "print(' '.join(m for m in ('subprocess', 'json', 'torch._dynamo', 'torch.onnx')"
        " if m in sys.modules))\n"
    )
    before = subprocess.run(
        [
            sys.executable,
            "-c",
            "import backend_spec._torch, backend_spec.names.resolver, sys\n"
            "print(' '.join(m for m in ('subprocess', 'json', 'torch._dynamo', 'torch.onnx')"
            " if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    after = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert set(after) <= set(before)
