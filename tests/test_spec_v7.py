"""The remaining constructs of issue 30: argument conditions on a pattern (``when``, spec_version
7), an input left to its producer's observer with a fixed-qparams output, and a shared input
only after an annotated producer (``input_observer: upstream_only`` on a shared-observer entry).

Each is compared with a hand-written quantizer that annotates as the vendor does
(tests/fixtures/quantizers/round3.py: LiteRT-, Core ML- and ENN-like) on small nets: same q/dq
placement, qparams and ``torch.equal`` outputs; and each case shows that the spec without the
construct differs, so the comparison is not vacuous. The slow tests export the fixtures with
``bespec export`` and verify them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torchao", reason="the pt2e extra (torchao) is not installed")

import torch  # noqa: E402
from _export_helpers import FIXTURES, differences, export, fixture, observed  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec.pt2e.table import Policy, Rule  # noqa: E402

F = torch.nn.functional

W8A8 = (
    "{input_dtype: {dtype: qint8, observer: histogram, scale_min_lower_bound: 0.000244140625, "
    "qscheme: QSCHEME}, output_dtype: {dtype: qint8, observer: histogram, "
    "scale_min_lower_bound: 0.000244140625, qscheme: QSCHEME}, weight_dtype: {dtype: qint8, "
    "quant_min_lower_bound: -127, scale_min_lower_bound: 0.000244140625, qscheme: symmetric}, "
    "bias_dtype: float}"
)
ACT = (
    "{input_dtype: {dtype: qint8, observer: histogram, scale_min_lower_bound: 0.000244140625, "
    "qscheme: QSCHEME}, output_dtype: {dtype: qint8, observer: histogram, "
    "scale_min_lower_bound: 0.000244140625, qscheme: QSCHEME}}"
)
SIGMOID = (
    "{input_dtype: {dtype: qint8, scale_exact_match: 0.00390625, zero_point_exact_match: -128}, "
    "output_dtype: {dtype: qint8, scale_exact_match: 0.00390625, zero_point_exact_match: -128}}"
)


def _fixture(name: str):
    return fixture("round3", name)


def _spec(patterns: str, qscheme: str = "affine", version: int = 7) -> str:
    body = patterns.replace("W8A8", W8A8).replace("ACT", ACT).replace("SIGMOID", SIGMOID)
    return f"spec_version: {version}\nname: t\ninput_sharing: qspec\npatterns:\n" + body.replace(
        "QSCHEME", qscheme
    )


def _differences(spec_text: str, fixture: str, models) -> list[str]:
    return differences(backend_spec.loads(spec_text, format="yaml"), _fixture(fixture), models)


class _Convs(torch.nn.Module):
    """conv + hardtanh(0, 6) (EnnQuantizer fuses it) and conv + hardtanh(-1, 1) (it does not)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return F.hardtanh(self.a(x), 0.0, 6.0), F.hardtanh(self.b(x))


class _Sigmoids(torch.nn.Module):
    """sigmoid of a graph input (left float), of a conv, then a linear reading it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 4, 1), torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.sigmoid(x), self.fc(torch.sigmoid(self.conv(x)))


class _Pools(torch.nn.Module):
    """max_pool2d after a conv, after a fixed-qparams sigmoid, and of a graph input."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 4, 1)

    def forward(self, x):
        pool = F.max_pool2d
        return pool(self.a(x), 2), pool(torch.sigmoid(self.b(x)), 2), pool(x, 2)


def _model(cls):
    def build():
        torch.manual_seed(0)
        return cls().eval(), (torch.randn(2, 3, 8, 8),)

    return build


CONV = """\
  - pattern: F.conv2d
    dtype_configs: [W8A8]
    aten: [[aten.conv2d.default]]
"""
HARDTANH = """\
  - pattern: F.hardtanh
    dtype_configs: [W8A8]
    aten: [[[aten.hardtanh.default, aten.hardtanh_.default]]]
"""
FUSED = """\
  - pattern: [F.conv2d, F.hardtanh]
    dtype_configs: [W8A8]
    aten: [[aten.conv2d.default, [aten.hardtanh.default, aten.hardtanh_.default]]]
"""
LINEAR = """\
  - pattern: F.linear
    dtype_configs: [W8A8]
    aten: [[aten.linear.default]]
"""
FIXED_SIGMOID = """\
  - pattern: torch.sigmoid
    dtype_configs: [SIGMOID]
    aten: [[[aten.sigmoid.default, aten.sigmoid_.default]]]
    quantize: if_input_quantized
"""
POOL = """\
  - pattern: F.max_pool2d
    observation_type: output_share_observer_with_input
    dtype_configs: [ACT]
    aten: [[aten.max_pool2d.default]]
    quantize: if_input_quantized
"""
BORROW = "    input_observer: upstream_only\n"


@pytest.mark.parametrize(
    ("fixture", "patterns", "without", "model", "qscheme"),
    [
        (
            "enn_like",
            FUSED + "    when: {min_val: 0.0}\n" + CONV + HARDTANH,
            FUSED + CONV + HARDTANH,
            _Convs,
            "affine",
        ),
        ("litert_like", CONV + LINEAR + FIXED_SIGMOID + BORROW, None, _Sigmoids, "affine"),
        (
            "coreml_like",
            CONV + FIXED_SIGMOID + BORROW + POOL + BORROW,
            CONV + FIXED_SIGMOID + BORROW + POOL,
            _Pools,
            "symmetric",
        ),
    ],
    ids=["when_min_val", "fixed_output_borrowed_input", "pool_shares_its_producer"],
)
def test_the_spec_quantizes_as_the_vendor_style_quantizer(
    fixture, patterns, without, model, qscheme
):
    models = [(model.__name__, _model(model))]
    assert _differences(_spec(patterns, qscheme), fixture, models) == []
    if without is not None:  # the construct is what makes them agree
        assert _differences(_spec(without, qscheme), fixture, models)


def test_a_borrowed_input_after_a_float_producer_leaves_the_op_float():
    """``upstream_only`` on a pool whose producer is not observed and has nothing observed up
    the chain: no observer at all (the pool is float), as Core ML leaves it."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    spec = backend_spec.loads(_spec(POOL.replace("if_input_quantized", "always") + BORROW))
    x = torch.randn(1, 3, 8, 8)
    exported = torch.export.export(_Pool().eval(), (x,)).module()
    prepared = prepare_pt2e(exported, backend_spec.quantizer(spec))
    observers = [n for n in prepared.graph.nodes if "activation_post_process" in str(n.target)]
    assert observers == []


class _Pool(torch.nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, 2)


@pytest.mark.parametrize(
    ("args", "when", "matched"),
    [
        ((0.0, 6.0), {"min_val": 0.0}, True),
        ((0.0, 6.0), {"min_val": 0}, True),  # 0 == 0.0
        ((-1.0, 1.0), {"min_val": 0.0}, False),
        ((), {"min_val": -1.0, "max_val": 1.0}, True),  # the schema's defaults count
        ((0.0, 6.0), {"min_val": False}, False),  # a bool equals only a bool
        ((0.0, 6.0), {"slope": 0.0}, False),  # no op of the chain has it
    ],
)
def test_when_matches_on_the_arguments_of_the_chain(args, when, matched):
    from backend_spec.pt2e.runtime import TableQuantizer

    class Clamp(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.hardtanh.default(x, *args)

    graph = torch.export.export(Clamp(), (torch.randn(2, 3),)).module().graph
    rule = Rule(
        label="hardtanh",
        chain=(("aten.hardtanh.default",),),
        where=(None,),
        groups=(0,),
        policy=Policy(when=tuple(when.items())),
    )
    quantizer = TableQuantizer({"format": 2, "specs": {}, "rules": [rule.to_data()]})
    (node,) = [n for n in graph.nodes if n.op == "call_function"]
    found = quantizer.walk(quantizer.rules[0], node, set())
    assert isinstance(found, list) is matched, found


def test_when_survives_compile_table_data_and_export():
    """Compiled into the rule's policy (a mapping in the table's plain data, pairs in the
    frozen form), and written back by ``bespec dump`` with spec_version 7."""
    from backend_spec.export import dump
    from backend_spec.pt2e.table import Table

    spec = backend_spec.loads(_spec(FUSED + "    when: {min_val: 0.0, max_val: 6}\n"))
    table = backend_spec.quantizer(spec).table
    rules = [r for r in table["rules"] if len(r["chain"]) == 2]  # traced and aten chains
    assert rules and all(r["policy"]["when"] == {"min_val": 0.0, "max_val": 6} for r in rules)
    assert Table.from_data(table).to_data()["rules"] == table["rules"]
    text = dump(spec)
    assert "spec_version: 7" in text and "when: {min_val: 0.0, max_val: 6}" in text
    toml = dump(spec, format="toml")
    assert "when = { min_val = 0.0, max_val = 6 }" in toml
    back = backend_spec.quantizer(backend_spec.loads(toml, format="toml")).table
    assert back["rules"] == table["rules"]


def _probe_op(target, args, output):
    return {
        "target": target,
        "inputs": {"0": ACT_QSPEC} if output is not None or target.startswith("aten.conv") else {},
        "kinds": {"0": "act", "1": "param"} if target.startswith("aten.conv") else {"0": "act"},
        "output": output,
        "args": args,
    }


ACT_QSPEC = observed()


def test_export_infers_when_from_chains_of_one_aten_chain_annotated_apart():
    """conv + ReLU6 probed fused, conv + Hardtanh (the same ATen chain) not: the fused entry
    gets the arguments on which the two differ, with the fused probe's values."""
    from backend_spec.export.quantizer.infer import infer
    from backend_spec.ir.lower import backend_of

    conv = "aten.conv2d.default"
    fused = [  # EnnQuantizer's fused pattern: the conv's inputs, the activation's output
        {**_probe_op(conv, {"stride": 1}, None), "inputs": {"0": ACT_QSPEC}},
        {
            **_probe_op("aten.hardtanh.default", {"min_val": 0.0, "max_val": 6.0}, ACT_QSPEC),
            "inputs": {},
        },
    ]
    apart = [
        _probe_op(conv, {"stride": 1}, ACT_QSPEC),
        _probe_op("aten.hardtanh.default", {"min_val": -1.0, "max_val": 1.0}, ACT_QSPEC),
    ]

    def unit(ops):
        return {"ops": ops, "pre": [], "post": []}

    probed = {"alone": {"nn.Conv2d>nn.ReLU6": unit(fused), "nn.Conv2d>nn.Hardtanh": unit(apart)}}
    names = {
        "nn.Conv2d>nn.ReLU6": ("nn.Conv2d", "nn.ReLU6"),
        "nn.Conv2d>nn.Hardtanh": ("nn.Conv2d", "nn.Hardtanh"),
    }
    inferred = infer(probed, names, "t")
    (entry,) = backend_of(inferred.backend_config)
    assert dict(entry.policy)["when"] == (("min_val", 0.0), ("max_val", 6.0))


LINEAR, CONV, ELU = "aten.linear.default", "aten.conv2d.default", "aten.elu.default"
SHARED = {"kind": "shared", "with": "producer:0"}


def _weighted(target, output):
    """Probe data of a Linear or conv: input and weight observed, ``output`` on its output."""
    inputs = {"0": ACT_QSPEC, "1": ACT_QSPEC}
    kinds = {"0": "act", "1": "param"}
    op = {"target": target, "inputs": inputs, "kinds": kinds, "output": output, "args": {}}
    return {**op, "annotated": True}


def _elu(inputs, output):
    op = {"target": ELU, "inputs": inputs, "kinds": {"0": "act"}, "output": output, "args": {}}
    return {**op, "annotated": output is not None}


FUSED_AFTER_LINEAR = ([_weighted(LINEAR, None)], [_elu({"0": None}, ACT_QSPEC)])
CHAIN_NAMES = {
    "nn.Linear>nn.ELU": ("nn.Linear", "nn.ELU"),
    "nn.Conv2d>nn.ELU": ("nn.Conv2d", "nn.ELU"),
}
PRODUCER_FUSION_CASES = [
    # (elu after a Linear: (producers, ops); the chains probed alone: key -> ops; the patterns
    #  the spec writes)
    ("fused after a linear", FUSED_AFTER_LINEAR, {}, {"[F.linear, F.elu]", "F.elu"}),
    (
        "its producer's qspec propagated",
        ([_weighted(LINEAR, ACT_QSPEC)], [_elu({"0": SHARED}, SHARED)]),
        {},
        {"F.elu"},
    ),
    (
        "a probed chain of the same ops decides",
        FUSED_AFTER_LINEAR,
        {"nn.Linear>nn.ELU": [_weighted(LINEAR, ACT_QSPEC), _elu({"0": None}, None)]},
        set(),
    ),
    (
        "float after a conv: no entry of its own",
        FUSED_AFTER_LINEAR,
        {"nn.Conv2d>nn.ELU": [_weighted(CONV, ACT_QSPEC), _elu({"0": None}, None)]},
        {"[F.linear, F.elu]"},
    ),
]


@pytest.mark.parametrize(
    ("label", "pre", "chains", "patterns"),
    PRODUCER_FUSION_CASES,
    ids=[case[0] for case in PRODUCER_FUSION_CASES],
)
def test_a_fusion_seen_only_after_a_producer_is_inferred_from_that_probe(
    label, pre, chains, patterns
):
    """An op the quantizer annotates only after a Linear, as one pattern with it (Core ML's
    linear + elu, EnnQuantizer's linear + F.relu6): a fusion entry from the ``pre`` probe,
    unless a probed chain of the same ATen ops says otherwise; and no entry of the op's own
    where a probed chain leaves it float after another quantized producer."""
    from backend_spec.export.quantizer.infer import infer

    producers, ops = pre
    alone = {key: {"ops": chain, "pre": [], "post": []} for key, chain in chains.items()}
    alone[ELU] = {"ops": [_elu({"0": None}, None)], "pre": [], "post": []}
    alone[LINEAR] = {"ops": [_weighted(LINEAR, ACT_QSPEC)], "pre": [], "post": []}
    probed = {"alone": alone, "pre": {ELU: {"ops": ops, "pre": producers, "post": []}}}
    names = {ELU: ("F.elu",), LINEAR: ("F.linear",), **{k: CHAIN_NAMES[k] for k in chains}}
    text = backend_spec.dump(infer(probed, names, "t").backend_config, format="yaml")
    written = {line.split("pattern: ")[1] for line in text.splitlines() if "pattern: " in line}
    assert written - {"F.linear"} == patterns


ADD = "aten.add.Tensor"


def _add(annotated: bool) -> dict:
    inputs = {"0": ACT_QSPEC, "1": ACT_QSPEC} if annotated else {}
    output = ACT_QSPEC if annotated else None
    return {"target": ADD, "inputs": inputs, "kinds": {"0": "act"}, "output": output, "args": {}}


SCALAR_CASES = [
    # (add probed: with two tensors, with a broadcast, with a number; the keys written)
    (
        "a number left float",
        (True, True, False),
        {"num_tensor_args_to_observation_type": "1: input_output_not_observed"},
    ),
    ("broadcasts and numbers float", (True, False, False), {"input_shapes": "equal"}),
    ("a number observed too", (True, True, True), {}),
]


@pytest.mark.parametrize(
    ("label", "probes", "written"), SCALAR_CASES, ids=[case[0] for case in SCALAR_CASES]
)
def test_a_binary_op_left_float_with_a_number_counts_its_tensor_operands(label, probes, written):
    """add annotated with two tensors of any shape but not with a number (EnnQuantizer's
    ``annotate_2in1out``): FX's observation by tensor count, ``input_output_not_observed``
    for one tensor; with broadcasts float too, ``input_shapes: equal`` says both."""
    from backend_spec.export.quantizer.infer import infer

    alone = {
        f"{ADD}{suffix}": {"ops": [_add(flag)], "pre": [], "post": []}
        for suffix, flag in zip(("", "#broadcast", "#scalar"), probes, strict=True)
    }
    inferred = infer({"alone": alone}, {ADD: ("torch.add",)}, "t")
    assert inferred.gaps == []
    text = backend_spec.dump(inferred.backend_config, format="yaml")
    for key in ("num_tensor_args_to_observation_type", "input_shapes"):
        assert (key in text) == (key in written), text
    for key, value in written.items():
        assert value in text.split(key, 1)[1], text


# --- slow: one CLI export per fixture --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "written"),
    [
        ("litert_like", "input_observer: upstream_only"),
        ("coreml_like", "input_observer: upstream_only"),
        ("enn_like", "when: {min_val: 0.0"),
        ("fused_tails_like", "pattern: [F.linear, F.hardswish]"),
        ("tensor_operands_like", "1: input_output_not_observed"),
    ],
)
def test_bespec_export_of_the_vendor_style_quantizers_exports_and_verifies(
    tmp_path, factory, written
):
    done, out = export(tmp_path, f"{FIXTURES / 'round3.py'}:{factory}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verified:" in done.stderr
    assert written in out.read_text()
