"""spec_version 5: the pt2e keys for hand-written quantizers such as executorch's EnnQuantizer.

``graph_inputs`` (top level): every float graph input is observed for its own sake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import backend_spec
from backend_spec._torch import torch
from backend_spec.diagnostics import SpecError

pytest.importorskip("torchao")

from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

#: The dtype configs every spec below starts from: int8 activations, and int8 per-tensor
#: weights beside them.
DTYPE_CONFIGS = """\
dtype_configs:
  act:
    input_dtype: {dtype: qint8, observer: minmax}
    output_dtype: {dtype: qint8, observer: minmax}
  weighted:
    input_dtype: {dtype: qint8, observer: minmax}
    output_dtype: {dtype: qint8, observer: minmax}
    weight_dtype: {dtype: qint8, qscheme: symmetric}
"""
#: The same, for the specs filled in with ``str.format``.
_DTYPE_CONFIGS_TEMPLATE = DTYPE_CONFIGS.replace("{", "{{").replace("}", "}}")

GRAPH_INPUTS_SPEC = (
    """\
spec_version: {version}
name: inputs
"""
    + _DTYPE_CONFIGS_TEMPLATE
    + """\
graph_inputs: {graph_inputs}
patterns:
  - pattern: F.linear
    dtype_configs: [weighted]
"""
)


def _spec(tmp_path: Path, version: int = 5, graph_inputs: str = "act") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(GRAPH_INPUTS_SPEC.format(version=version, graph_inputs=graph_inputs))
    return path


@pytest.mark.parametrize(
    ("version", "graph_inputs", "expected"),
    [
        (4, "act", ["BS206", "graph_inputs needs format version 5", "set spec_version: 5"]),
        (5, "nope", ["BS401", "no dtype config named 'nope'"]),
        (5, "'weighted'", []),
    ],
)
def test_graph_inputs_is_version_5_and_names_a_dtype_config(
    tmp_path: Path, version: int, graph_inputs: str, expected: list[str]
) -> None:
    path = _spec(tmp_path, version, graph_inputs)
    if not expected:
        backend_spec.load(path)
        return
    with pytest.raises(SpecError) as caught:
        backend_spec.load(path)
    text = str(caught.value)
    assert all(part in text for part in expected), text
    assert "s.yaml:11:" in text  # the graph_inputs line


class _LinearAndSin(torch.nn.Module):
    """``F.linear`` (the spec's pattern) of ``x``, plus ``sin(y)`` (no entry)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight) + torch.sin(y)


def _prepared(spec: Path) -> torch.fx.GraphModule:
    torch.manual_seed(0)
    args = (torch.randn(2, 4), torch.randn(2, 4))
    exported = torch.export.export(_LinearAndSin().eval(), args).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(spec))
    prepared(*args)
    return prepared


def _observer_after(prepared: torch.fx.GraphModule, name: str) -> list[str]:
    node = next(n for n in prepared.graph.nodes if n.name == name)
    return [u.target for u in node.users if "activation_post_process" in str(u.target)]


def test_graph_inputs_observes_every_float_input_whatever_reads_it(tmp_path: Path) -> None:
    """``y`` feeds only ``sin``, which no entry quantizes: still observed; ``x`` feeds the
    linear, whose input shares that one observer (no second one on the edge)."""
    with_inputs = _prepared(_spec(tmp_path))
    assert len(_observer_after(with_inputs, "x")) == 1
    assert len(_observer_after(with_inputs, "y")) == 1
    without = tmp_path / "plain.yaml"
    without.write_text(_spec(tmp_path).read_text().replace("graph_inputs: act\n", ""))
    plain = _prepared(without)
    assert len(_observer_after(plain, "x")) == 1  # the linear's own input observer
    assert _observer_after(plain, "y") == []
    converted = convert_pt2e(with_inputs, fold_quantize=False)
    quantized = {str(n.args[0]) for n in converted.graph.nodes if "quantize_per" in str(n.target)}
    assert {"x", "y"} <= quantized


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_graph_inputs_round_trips_and_is_diffed(tmp_path: Path, fmt: str) -> None:
    from backend_spec.analysis.compare import diff

    loaded = backend_spec.load(_spec(tmp_path))
    text = backend_spec.dump(loaded, fmt)
    assert "spec_version" in text and "graph_inputs" in text
    again = tmp_path / f"again.{fmt}"
    again.write_text(text)
    reloaded = backend_spec.load(again)
    assert diff(loaded, reloaded) == []
    assert _observer_after(_prepared(again), "y")
    other = backend_spec.load(_spec(tmp_path, graph_inputs="weighted"))
    changed = [d.field for d in diff(loaded, other)]
    assert changed == ["graph_inputs.weight_dtype.dtype", "graph_inputs.weight_dtype.qscheme"]


def test_graph_inputs_survive_an_edit_through_torchs_api_and_extends(tmp_path: Path) -> None:
    """The loaded config keeps its intermediate form (graph_inputs included) when a pattern is
    added with torch's own setter, and a spec extending it inherits graph_inputs."""
    from backend_spec._torch import BackendPatternConfig

    loaded = backend_spec.load(_spec(tmp_path))
    loaded.set_backend_pattern_config(BackendPatternConfig(torch.nn.ReLU6))
    text = backend_spec.dump(loaded, "yaml")
    assert "graph_inputs" in text and "ReLU6" in text
    child = tmp_path / "child.yaml"
    child.write_text(f"spec_version: 5\nname: child\nextends: {_spec(tmp_path).name}\n")
    assert "graph_inputs" in backend_spec.dump(backend_spec.load(child), "yaml")


def test_a_dtype_config_named_only_by_graph_inputs_is_used(tmp_path: Path) -> None:
    from backend_spec.lint import lint_path

    path = _spec(tmp_path)
    assert "BS507" not in {d.code for d in lint_path(path)}
    path.write_text(path.read_text().replace("graph_inputs: act\n", ""))
    assert "BS507" in {d.code for d in lint_path(path)}  # then 'act' is unused


def test_graph_inputs_are_inferred_when_every_float_input_is_observed_alike() -> None:
    from _export_helpers import observed

    from backend_spec.export.quantizer.infer import infer
    from backend_spec.ir.lower import backend_of

    act = observed(observer="MinMaxObserver")
    found = infer({}, {}, "q", [act, act])
    mapping = backend_of(found.backend_config).graph_inputs.mapping("input_dtype")
    assert mapping.dtype == torch.qint8 and mapping.get("scale_min_lower_bound") == 2**-12
    assert found.gaps == []
    assert backend_of(infer({}, {}, "q", [None, None]).backend_config).graph_inputs is None
    # Some observed, some not: each observer is read as its reader's input qspec (no key).
    mixed = infer({}, {}, "q", [act, None])
    assert backend_of(mixed.backend_config).graph_inputs is None and mixed.gaps == []
    unlike = infer({}, {}, "q", [act, {**act, "dtype": "uint8", "quant_min": 0, "quant_max": 255}])
    assert backend_of(unlike.backend_config).graph_inputs is None
    assert [gap.op for gap in unlike.gaps] == ["graph inputs"]


# --- pattern keys: input_observer, producers -------------------------------------------------

POLICY_SPEC = (
    """\
spec_version: {version}
name: policies
"""
    + _DTYPE_CONFIGS_TEMPLATE
    + """\
patterns:
  - pattern: F.linear
    dtype_configs: [weighted]
    {linear}
  - pattern: F.max_pool1d
    observation_type: output_share_observer_with_input
    dtype_configs: [act]
  - pattern: torch.cat
    observation_type: output_share_observer_with_input
    dtype_configs: [act]
    {cat}
"""
)


def _policy_spec(tmp_path: Path, linear: str = "", cat: str = "", version: int = 5) -> Path:
    path = tmp_path / "policies.yaml"
    path.write_text(POLICY_SPEC.format(version=version, linear=linear, cat=cat))
    return path


@pytest.mark.parametrize(
    ("linear", "cat"), [("input_observer: upstream", ""), ("", "producers: join")]
)
def test_version_5_pattern_keys_need_version_5(tmp_path: Path, linear: str, cat: str) -> None:
    with pytest.raises(SpecError) as caught:
        backend_spec.load(_policy_spec(tmp_path, linear, cat, version=4))
    text = str(caught.value)
    key = (linear or cat).split(":")[0]
    assert "BS206" in text and f"{key} needs format version 5" in text


class _Policies(torch.nn.Module):
    """linear -> sin (no entry) -> linear; and cat([linear(x), max_pool1d(linear(x))])."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8, 8))
        self.w2 = torch.nn.Parameter(torch.randn(8, 8))
        self.w3 = torch.nn.Parameter(torch.randn(8, 8))
        self.w4 = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = torch.nn.functional
        chained = f.linear(torch.sin(f.linear(x, self.w1)), self.w2)
        pooled = f.max_pool1d(f.linear(x, self.w3), 2)
        return chained, torch.cat([f.linear(x, self.w4), pooled], -1)


def _observers(spec: Path, model: type[torch.nn.Module] | None = None) -> dict[str, object]:
    """Node name -> the observer module on its output (prepared and calibrated) for ``model``
    (default: the policies model)."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    exported = torch.export.export((model or _Policies)().eval(), (x,)).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(spec))
    prepared(x)
    found = {}
    for node in prepared.graph.nodes:
        for user in node.users:
            if "activation_post_process" in str(user.target):
                found[node.name] = getattr(prepared, user.target)
    return found


def test_input_observer_upstream_shares_the_nearest_observed_ops_observer(
    tmp_path: Path,
) -> None:
    """The second linear reads sin (float): ``upstream`` observes that edge with the first
    linear's output observer (one instance, one set of qparams); ``own`` with a new one."""
    upstream = _observers(_policy_spec(tmp_path, linear="input_observer: upstream"))
    assert upstream["sin"] is upstream["linear"]
    own = _observers(_policy_spec(tmp_path))
    assert own["sin"] is not own["linear"]


def test_producers_join_keeps_the_producers_groups_and_unites_them(tmp_path: Path) -> None:
    """cat's second input is max_pool1d, which shares its linear's observer: ``join`` keeps
    that sharing (one group: both linears, max_pool1d, cat); ``split`` (FX) cuts the pooled
    linear out of the cat's group."""
    joined = _observers(_policy_spec(tmp_path, cat="producers: join"))
    assert joined["linear_2"] is joined["max_pool1d"] is joined["cat"] is joined["linear_3"]
    split = _observers(_policy_spec(tmp_path))
    assert split["max_pool1d"] is split["cat"] is split["linear_3"]
    assert split["linear_2"] is not split["cat"]


VIEW_SPEC = (
    """\
spec_version: 5
name: views
"""
    + DTYPE_CONFIGS
    + """\
patterns:
  - pattern: F.linear
    dtype_configs: [weighted]
  - pattern: torch.flatten
    observation_type: output_share_observer_with_input
    dtype_configs: [act]
    aten: [[aten.flatten.using_ints]]
"""
)


class _View(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(torch.sin(torch.nn.functional.linear(x, self.weight)), 1)


@pytest.mark.parametrize("upstream", [True, False])
def test_a_sharing_entry_with_upstream_joins_the_nearest_observed_group(
    tmp_path: Path, upstream: bool
) -> None:
    """flatten reads sin (float): with ``upstream`` its output joins the linear's group and
    the sin -> flatten edge stays float; without, that edge gets an observer of its own."""
    path = tmp_path / "views.yaml"
    text = VIEW_SPEC + ("    input_observer: upstream\n" if upstream else "")
    path.write_text(text)
    found = _observers(path, _View)
    if upstream:
        assert "sin" not in found and found["flatten"] is found["linear"]
    else:
        assert found["sin"] is found["flatten"] and found["flatten"] is not found["linear"]


def test_upstream_is_inferred_from_the_gap_probes() -> None:
    """A single op whose input (or output) shares a qspec elsewhere in the graph when a float
    op stands between it and the quantized producer; not a chain, not a local share."""
    from backend_spec.export.quantizer.infer import _upstream_readers

    elsewhere = {"kind": "shared", "with": "other"}
    local = {"kind": "shared", "with": "input:0"}

    def unit(*ops):
        return {"ops": [{"target": t, "inputs": {"0": q}, "output": o} for t, q, o in ops]}

    probed = {
        "gap": {
            "linear": unit(("aten.linear.default", elsewhere, None)),
            "flatten": unit(("aten.flatten.using_ints", None, elsewhere)),
            "relu": unit(("aten.relu.default", local, local)),
            "chain": unit(
                ("aten.conv2d.default", elsewhere, None), ("aten.relu.default", None, None)
            ),
        }
    }
    assert _upstream_readers(probed) == {"aten.linear.default", "aten.flatten.using_ints"}


SOFTMAX_SPEC = (
    """\
spec_version: 5
name: borrowed
"""
    + _DTYPE_CONFIGS_TEMPLATE
    + """\
patterns:
  - pattern: F.linear
    dtype_configs: [weighted]
  - pattern: F.softmax
    dtype_configs: [act]
    aten: [[aten.softmax.int]]
    input_observer: {value}
"""
)


class _Softmaxes(torch.nn.Module):
    """softmax of a graph input (z), of a linear, and of sin(linear)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        f = torch.nn.functional
        y = f.linear(x, self.weight)
        return f.softmax(z, -1), f.softmax(y, -1), f.softmax(torch.sin(y), -1)


@pytest.mark.parametrize("value", ["upstream_only", "upstream", "own"])
def test_upstream_only_never_gives_the_input_an_observer_of_its_own(
    tmp_path: Path, value: str
) -> None:
    """``upstream_only``: z (a graph input, not observed) stays float, the linear's output is
    shared, sin stays float (the edge comes from the linear); ``upstream`` observes sin's
    edge with the linear's observer; ``own`` gives z and sin observers of their own."""
    path = tmp_path / "softmax.yaml"
    path.write_text(SOFTMAX_SPEC.format(value=value))
    torch.manual_seed(0)
    args = (torch.randn(2, 8), torch.randn(2, 8))
    exported = torch.export.export(_Softmaxes().eval(), args).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(path))
    prepared(*args)
    found = {}
    for node in prepared.graph.nodes:
        for user in node.users:
            if "activation_post_process" in str(user.target):
                found[node.name] = getattr(prepared, user.target)
    observed = {name for name in found if name in ("z", "linear", "sin")}
    expected = {
        "upstream_only": {"linear"},
        "upstream": {"linear", "z", "sin"},
        "own": {"linear", "z", "sin"},
    }[value]
    assert observed == expected
    if value == "upstream":
        assert found["sin"] is found["linear"]
    if value == "own":
        assert found["sin"] is not found["linear"]


def test_a_single_op_with_only_an_output_qspec_borrows_its_input() -> None:
    from backend_spec.export.quantizer.infer import _borrows_input

    observed = {"kind": "observed", "dtype": "int8"}
    assert _borrows_input(["aten.softmax.int"], observed)
    assert not _borrows_input(["aten.conv3d.default", "aten.relu.default"], observed)
    assert not _borrows_input(["aten.softmax.int"], {"kind": "shared", "with": "input:0"})
    assert not _borrows_input(["aten.softmax.int"], None)


@pytest.mark.parametrize("qat", [False, True])
def test_graph_inputs_is_a_spec_of_the_rule_table_ptq_and_qat(tmp_path: Path, qat: bool) -> None:
    from backend_spec.pt2e.rules import compile_table

    table, _report = compile_table(backend_spec.load(_spec(tmp_path)), qat=qat)
    spec = table["specs"][table["graph_inputs"]]
    assert (spec["dtype"], spec["observer"]) == ("int8", "MinMaxObserver")
    assert ("fake_quant" in spec) is qat
    plain, _report = compile_table(backend_spec.load(_policy_spec(tmp_path)), qat=qat)
    assert "graph_inputs" not in plain  # older tables are unchanged


SHARING_SPEC = (
    """\
spec_version: {version}
name: sharing
{sharing}
"""
    + _DTYPE_CONFIGS_TEMPLATE
    + """\
  fixed:
    input_dtype: {{dtype: qint8, scale_exact_match: 0.00390625, zero_point_exact_match: -128}}
    output_dtype: {{dtype: qint8, scale_exact_match: 0.00390625, zero_point_exact_match: -128}}
patterns:
  - pattern: F.linear
    dtype_configs: [weighted]
  - pattern: torch.sigmoid
    dtype_configs: [fixed]
"""
)


def _sharing_spec(tmp_path: Path, sharing: str | None, version: int = 5) -> Path:
    path = tmp_path / f"sharing-{sharing}-{version}.yaml"
    line = "" if sharing is None else f"input_sharing: {sharing}"
    path.write_text(SHARING_SPEC.format(version=version, sharing=line), encoding="utf-8")
    return path


class _LinearSigmoidLinear(torch.nn.Module):
    """F.linear, sigmoid, F.linear (the spec's entries match the functional spelling)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(4, 4))
        self.b = torch.nn.Parameter(torch.randn(2, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linear = torch.nn.functional.linear
        return linear(torch.sigmoid(linear(x, self.a)), self.b)


def _observers_into_second_linear(spec: Path) -> list[str]:
    """The observer classes between the sigmoid and the second linear, after prepare_pt2e."""
    torch.manual_seed(0)
    model, inputs = _LinearSigmoidLinear().eval(), (torch.randn(2, 4),)
    exported = torch.export.export(model, inputs).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(spec))
    linear = [n for n in prepared.graph.nodes if n.target == torch.ops.aten.linear.default][-1]
    found, node = [], linear.args[0]
    while node.op == "call_module":
        found.append(type(getattr(prepared, node.target)).__name__)
        node = node.args[0]
    return found


@pytest.mark.parametrize(
    ("sharing", "expected"),
    [
        (None, ["FixedQParamsObserver"]),  # FX's rule: the linear reads the fixed qparams
        ("dtype", ["FixedQParamsObserver"]),
        ("qspec", ["MinMaxObserver", "FixedQParamsObserver"]),  # observed again, as torchao
    ],
)
def test_input_sharing_decides_whether_an_input_reuses_another_qspec(
    tmp_path: Path, sharing: str | None, expected: list[str]
) -> None:
    assert _observers_into_second_linear(_sharing_spec(tmp_path, sharing)) == expected


def test_input_sharing_is_version_5_round_trips_and_is_diffed(tmp_path: Path) -> None:
    from backend_spec.analysis.compare import diff

    with pytest.raises(SpecError) as error:
        backend_spec.load(_sharing_spec(tmp_path, "qspec", version=4))
    assert "BS206" in str(error.value) and "input_sharing" in str(error.value)
    with pytest.raises(SpecError):
        backend_spec.load(_sharing_spec(tmp_path, "always"))
    qspec = backend_spec.load(_sharing_spec(tmp_path, "qspec"))
    text = backend_spec.dump(qspec, "toml")
    assert 'input_sharing = "qspec"' in text
    again = tmp_path / "again.toml"
    again.write_text(text, encoding="utf-8")
    assert diff(qspec, backend_spec.load(again)) == []
    default = backend_spec.load(_sharing_spec(tmp_path, None))
    changed = diff(default, qspec)
    assert [(d.field, d.old, d.new) for d in changed] == [("input_sharing", "dtype", "qspec")]
    assert "input_sharing" not in backend_spec.dump(default)
