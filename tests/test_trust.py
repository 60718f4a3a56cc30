"""The trust model of names (docs/security.md): what callable, module and sequential fields
accept, C-method owners, and resolution independent of what the process imported before."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend_spec import SpecError, loads
from backend_spec.names.resolver import Kind, NameProblem, Resolver, defining_module

# Each probe was a reproduced hole: calling it from prepare_fx poisons the process, or it
# resolved through a C method that has no __module__, or only when something imported it first.
PROBES = [
    ("torch.nn.modules.module.register_module_forward_hook", Kind.FUNCTION, "BS306"),
    ("nn.modules.module.register_module_forward_hook", Kind.FUNCTION, "BS306"),
    ("torch.serialization.register_package", Kind.FUNCTION, "BS302"),
    ("torch._jit_internal._TensorExtractor.dump", Kind.FUNCTION, "BS302"),
    ("torch._jit_internal._TensorExtractor.dump", Kind.OP, "BS302"),
    ("torch.utils.cpp_extension.load_inline", Kind.FUNCTION, "BS302"),
    ("torch.utils.cpp_extension.load_inline", Kind.OP, "BS302"),
    ("torch.manual_seed", Kind.FUNCTION, "BS306"),
    ("torch.set_default_dtype", Kind.FUNCTION, "BS306"),
    ("nn.Module.register_forward_hook", Kind.FUNCTION, "BS306"),
    ("F.relu", Kind.FUNCTION, "BS306"),
    ("torch.ao.quantization.MinMaxObserver", Kind.MODULE, "BS306"),
    ("torch.ao.quantization.observer.MinMaxObserver", Kind.MODULE, "BS302"),
    ("nn.Identity", Kind.FUSED_MODULE, "BS303"),
    ("nn.Conv2d", Kind.FUSED_MODULE, "BS303"),
    ("torch._dynamo.config", Kind.OP, "BS302"),
]


@pytest.mark.parametrize(("name", "kind", "code"), PROBES)
def test_hostile_names_are_refused(name, kind, code):
    with pytest.raises(NameProblem) as info:
        Resolver().resolve(name, kind)
    assert info.value.code == code, info.value.message


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("fuse_conv_bn", Kind.FUNCTION),
        ("torch.ao.quantization.fuser_method_mappings.fuse_linear_bn", Kind.FUNCTION),
        ("_conv_add_root_node_getter_left", Kind.FUNCTION),
        ("nni.ConvReLU2d", Kind.FUSED_MODULE),
        ("nniqat.ConvBnReLU2d", Kind.FUSED_MODULE),
        ("nnqr.Linear", Kind.MODULE),
        ("torch.nn.modules.conv.Conv2d", Kind.MODULE),
        ("torch.add", Kind.OP),
        ("torch.Tensor.add", Kind.OP),
        ("nn.Module.register_forward_hook", Kind.OP),  # ops are compared, never called
    ],
)
def test_trusted_names_still_resolve(name, kind):
    assert Resolver().resolve(name, kind) is not None


def test_c_methods_are_owned_by_their_class():
    dump = vars(torch._jit_internal._TensorExtractor.__mro__[1])["dump"]
    assert defining_module(dump) == "_pickle"
    assert defining_module(torch.Tensor.add) == "torch._C"


def test_allowed_module_functions_pass_the_callable_predicate():
    resolver = Resolver(["bespec_custom_fusers"])
    import bespec_custom_fusers

    assert resolver.trusted_callable(bespec_custom_fusers.fuse_linear_relu) == ""
    assert resolver.trusted_callable(torch.manual_seed) != ""
    assert Resolver().trusted_callable(bespec_custom_fusers.fuse_linear_relu) != ""


@pytest.mark.parametrize(
    ("fuser", "code"),
    [
        ("{sequential: nn.Identity}", "BS303"),  # would silently drop both layers
        ("torch.nn.modules.module.register_module_forward_hook", "BS306"),
    ],
)
def test_bad_fusers_in_a_spec_are_errors_at_their_line_and_never_called(fuser, code):
    text = f"name: x\npatterns:\n  - pattern: [nn.Conv2d, nn.ReLU]\n    fuser_method: {fuser}\n"
    with pytest.raises(SpecError) as info:
        loads(text)
    assert [(d.code, d.line) for d in info.value.diagnostics] == [(code, 4)]
    assert not torch.nn.modules.module._global_forward_hooks


HISTORY_NAMES = [
    "torch.utils.cpp_extension.load_inline",
    "torch.ao.quantization.observer.MinMaxObserver",
    "torch.nn.modules.lazy.LazyModuleMixin",
    "torch._dynamo.config",
    "torch.ao.quantization.backend_config.x86.get_x86_backend_config",
]


def test_resolution_does_not_depend_on_import_history():
    program = (
        "import sys\nif sys.argv[1] == 'pre':\n"
        "    import importlib\n"
        "    for n in sys.argv[2:]: importlib.import_module(n.rsplit('.', 1)[0])\n"
        "from backend_spec.names.resolver import Resolver, Kind, NameProblem\n"
        "for n in sys.argv[2:]:\n"
        "    try: Resolver().resolve(n, Kind.OP); print('ok')\n"
        "    except NameProblem as p: print(p.code)\n"
    )
    answers = [
        subprocess.run(
            [sys.executable, "-c", program, pre, *HISTORY_NAMES],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for pre in ("fresh", "pre")
    ]
    assert answers[0] == answers[1]
    assert answers[0] == ["BS302", "BS302", "BS303", "BS302", "ok"]


_PARTS = st.sampled_from(
    [
        "torch",
        "nn",
        "F",
        "os",
        "sys",
        "utils",
        "cpp_extension",
        "serialization",
        "_C",
        "ao",
        "quantization",
        "Module",
        "register_forward_hook",
        "__globals__",
        "x",
        "1",
        "",
        "method:",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(_PARTS, min_size=1, max_size=6), kind=st.sampled_from(list(Kind)))
def test_fuzzed_names_resolve_or_fail_with_a_name_problem(parts: list[str], kind: Kind) -> None:
    before = set(sys.modules)
    try:
        obj = Resolver().resolve(".".join(parts), kind)
    except NameProblem as problem:
        assert problem.code.startswith("BS3")
    else:
        if kind is Kind.FUNCTION:
            assert Resolver().trusted_callable(obj) == ""
    new = {m for m in set(sys.modules) - before if not m.startswith("torch")}
    assert not new, new


# One trust predicate for every way of naming a fuser: each row is a pattern, its fused_module
# (or none), a fuser in some form, and the refusal (code, 1-based column on the fuser line,
# words of the message), or None when it must compile. Reproduced holes of issue 17 first.
_WRAP = "torch.ao.quantization.fuser_method_mappings._sequential_wrapper2"
FUSER_FORMS = [
    # factory calls whose class argument would drop or hide the matched layers
    (
        "[nn.Conv2d, nn.ReLU]",
        "nni.ConvReLU2d",
        f"{{call: {_WRAP}, args: [nn.Identity]}}",
        ("BS303", 35 + len(_WRAP), "becomes the fused module"),
    ),
    (
        "[nn.Conv2d, nn.ReLU]",
        None,
        f"{{call: {_WRAP}, args: [nn.Sequential]}}",
        ("BS303", 35 + len(_WRAP), "fused module class"),
    ),
    (
        "[nn.Conv2d, nn.ReLU]",
        None,
        f"{{call: {_WRAP}, args: [torch.nn.Module]}}",
        ("BS303", 35 + len(_WRAP), "fused module class"),
    ),
    (
        "[nn.Conv2d, nn.ReLU]",
        None,
        f"{{call: {_WRAP}, args: [torch.nn]}}",
        ("BS303", 35 + len(_WRAP), "cannot be a module"),
    ),
    (
        "[nn.Conv2d, nn.ReLU]",
        None,
        f"{{call: {_WRAP}, args: [torch.manual_seed]}}",
        ("BS306", 35 + len(_WRAP), "callable field"),
    ),
    (
        "[nn.Conv2d, nn.ReLU]",
        None,
        f"{{call: {_WRAP}, args: [{{call: {_WRAP}, args: [nni.ConvReLU2d]}}]}}",
        ("BS305", 42 + len(_WRAP), "inside the arguments of another"),
    ),
    # a trusted class, but not the one the entry declares: proved on float modules
    (
        "[nn.Linear, nn.ReLU]",
        "nni.LinearReLU",
        f"{{call: {_WRAP}, args: [nni.ConvReLU2d]}}",
        ("BS307", 19, "fails on float (nn.Linear, nn.ReLU)"),
    ),
    (
        "[nn.Linear, nn.ReLU]",
        "nni.ConvReLU2d",
        f"{{call: {_WRAP}, args: [nni.LinearReLU]}}",
        ("BS307", 19, "builds nni.LinearReLU from float (nn.Linear, nn.ReLU), not the declared"),
    ),
    (
        "[nn.Linear, nn.ReLU]",
        "nni.ConvReLU2d",
        "{sequential: nni.LinearReLU}",
        ("BS307", 19, "not the declared fused_module nni.ConvReLU2d"),
    ),
    (
        "[nn.Linear, nn.ReLU]",
        "nni.LinearReLU",
        "{reverse2: {sequential: nni.LinearReLU}}",
        ("BS307", 19, "fails on float"),
    ),
    ("[nn.Conv2d, nn.BatchNorm2d]", "nni.ConvBn2d", "fuse_linear_bn", ("BS307", 19, "fails")),
    (
        "[nn.Linear, F.leaky_relu]",
        "nni.LinearReLU",
        f"{{call: {_WRAP}, args: [nni.ConvReLU2d]}}",
        ("BS307", 19, "fails on float"),
    ),
    # what torch's own configs do still compiles
    ("[nn.Linear, nn.ReLU]", "nni.LinearReLU", f"{{call: {_WRAP}, args: [nni.LinearReLU]}}", None),
    ("[nn.Conv2d, nn.BatchNorm2d]", "nni.ConvBn2d", "fuse_conv_bn", None),
    ("[nn.Conv2d, nn.BatchNorm2d, F.relu]", "nni.ConvBnReLU2d", "fuse_conv_bn_relu", None),
    ("[nn.Linear, F.leaky_relu]", "nni.LinearLeakyReLU", "{sequential: nni.LinearLeakyReLU}", None),
    ("[nn.ReLU, nn.Conv2d]", None, "{reverse_sequential: nni.ConvReLU2d}", None),
    ("[nn.BatchNorm1d, nn.Linear]", None, "{reverse2: fuse_linear_bn}", None),
    ("[nn.ConvTranspose2d, nn.BatchNorm2d]", None, "fuse_convtranspose_bn", None),
]


@pytest.mark.parametrize(("pattern", "fused", "fuser", "want"), FUSER_FORMS)
def test_every_fuser_form_passes_one_predicate_and_builds_its_fused_module(
    pattern, fused, fuser, want
):
    fused_line = f"    fused_module: {fused}\n" if fused else ""
    text = (
        f"spec_version: 2\nname: x\npatterns:\n  - pattern: {pattern}\n{fused_line}"
        f"    fuser_method: {fuser}\n"
    )
    if want is None:
        assert loads(text).configs[0].fuser_method is not None
        return
    with pytest.raises(SpecError) as info:
        loads(text)
    (diag,) = info.value.diagnostics
    code, column, words = want
    assert (diag.code, diag.line, diag.column) == (code, text.count("\n"), column), str(diag)
    assert words in diag.message and diag.hint, str(diag)


def test_fuser_proofs_are_cached_per_fuser_and_pattern() -> None:
    from backend_spec.compiler import fuser_check

    text = "name: x\npatterns:\n  - pattern: [nn.Conv3d, nn.ReLU]\n    fused_module: nni.ConvReLU3d\n    fuser_method: {sequential: nni.ConvReLU3d}\n"  # noqa: E501
    loads(text)
    calls = []
    real = fuser_check._prove
    fuser_check._prove = lambda *a: calls.append(a) or real(*a)
    try:
        loads(text)  # a new closure each compile, the same class: one proof
    finally:
        fuser_check._prove = real
    assert calls == []
