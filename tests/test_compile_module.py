"""``compile -o`` keeps what it can and says what it cannot: the module keeps the spec's
dtype-config names, its ``get_qconfig_mapping()`` keeps the version 2 observer options a
BackendConfig has no field for (per-channel weights quantize per channel through it), and a
BS920 warning names each option left out of ``get_backend_config()`` and where it went."""

from __future__ import annotations

import copy
import runpy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec._torch import quiet, torch
from backend_spec.analysis.qconfigs import qconfig_mapping
from backend_spec.cli.app import app
from backend_spec.compiler.loader import load

runner = CliRunner()

HEAD = """\
spec_version: 2
name: mychip
dtype_configs:
  act_w8:
    input_dtype: {input}
    output_dtype: quint8
    weight_dtype: {weight}
    bias_dtype: float
  act8: {{input_dtype: quint8, output_dtype: quint8}}
patterns:
  - pattern: nn.Conv2d
    dtype_configs: [act_w8]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: nn.Linear
    dtype_configs: [act_w8]
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
  - pattern: operator.add
    dtype_configs: [act8]
{extra}"""

PER_CHANNEL = "{dtype: qint8, granularity: per_channel}"
AFFINE = "{dtype: qint8, qscheme: affine, observer: moving_average_minmax, fake_quant: learnable}"

#: (case, input mapping, weight mapping, extra entry text, warnings expected (substrings),
#:  the conv's weight granularity and input observer prepare/convert_fx give through the
#:  module's get_qconfig_mapping()).
CASES = [
    ("v1", "quint8", "qint8", "", [], "per_tensor", "MinMaxObserver"),
    (
        "per_channel",
        "quint8",
        PER_CHANNEL,
        "",
        ["'act_w8' sets weight_dtype.granularity: per_channel"],
        "per_channel",
        "MinMaxObserver",
    ),
    (
        "observers",
        "{dtype: quint8, observer: histogram}",
        AFFINE,
        "",
        [
            "'act_w8' sets input_dtype.observer: histogram, "
            "weight_dtype.observer: moving_average_minmax, weight_dtype.qscheme: affine, "
            "weight_dtype.fake_quant: learnable"
        ],
        "per_tensor",
        "HistogramObserver",
    ),
    (
        "pt2e_keys",
        "quint8",
        PER_CHANNEL,
        "    aten: [[aten.add.Tensor]]\n    quantize: if_input_quantized\n",
        ["per_channel", "leaves out the pt2e keys aten, quantize", "--target pt2e"],
        "per_channel",
        "MinMaxObserver",
    ),
]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.linear(y + y)


@pytest.mark.parametrize(
    ("case", "inp", "weight", "extra", "warnings", "granularity", "observer"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_compiled_module_keeps_names_and_observer_options(
    tmp_path: Path, case, inp, weight, extra, warnings, granularity, observer
) -> None:
    from torch.ao.quantization.qconfig import qconfig_equals
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

    spec = tmp_path / f"{case}.yaml"
    spec.write_text(HEAD.format(input=inp, weight=weight, extra=extra))
    out = tmp_path / f"{case}.py"
    result = runner.invoke(app, ["compile", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    found = [line for line in result.output.splitlines() if "BS920" in line]
    assert bool(found) == bool(warnings), result.output
    for text in warnings:
        assert text in result.output, result.output
    if weight != "qint8":  # placed at the dtype config's key (line 4, column 3)
        assert f"{spec}:4:3: warning BS920 dtype config 'act_w8'" in result.output

    module = runpy.run_path(str(out))
    assert list(module["DTYPE_CONFIGS"]) == ["act_w8", "act8"]
    # torch's own view (no version 2 options): the BackendConfig is the spec's.
    assert module["get_backend_config"]().to_dict() == load(spec).to_dict()
    for qat in (False, True):
        ours = module["get_qconfig_mapping"](qat=qat).object_type_qconfigs
        theirs = qconfig_mapping(spec, qat=qat).object_type_qconfigs
        assert list(ours) == list(theirs)
        assert all(qconfig_equals(ours[op], theirs[op]) for op in theirs)

    torch.manual_seed(0)
    example = (torch.randn(2, 3, 8, 8),)
    with quiet():
        prepared = prepare_fx(
            Net().eval(),
            module["get_qconfig_mapping"](),
            example,
            backend_config=module["get_backend_config"](),
        )
        prepared(*example)
        input_observer = type(prepared.activation_post_process_0).__name__
        backend = module["get_backend_config"]()
        lowered = convert_fx(copy.deepcopy(prepared), backend_config=backend)
        lowered(*example)
        converted = convert_to_reference_fx(prepared, backend_config=backend)
        converted(*example)
    conv = converted.conv
    assert type(conv).__module__.startswith("torch.ao.nn.quantized.reference")
    assert str(conv.weight_qscheme).startswith(f"torch.{granularity}")
    assert input_observer == observer


@pytest.mark.parametrize(
    ("weight", "shown"),
    [
        ("qint8", "| qint8 |"),
        (PER_CHANNEL, "qint8 (per_channel)"),
        (
            "{dtype: qint8, observer: histogram, ch_axis: 1}",
            "qint8 (observer histogram, ch_axis 1)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["show", "docs"])
def test_show_and_docs_show_observer_options(tmp_path: Path, command, weight, shown) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(HEAD.format(input="quint8", weight=weight, extra=""))
    result = runner.invoke(app, [command, str(spec)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    if command == "show":  # the dtype table: name, input, weight, ...
        shown = shown.strip("| ")
        row = next(line for line in result.output.splitlines() if line.startswith("act_w8"))
        assert row.split()[:3] == ["act_w8", "quint8", *shown.split()[:1]]
        assert shown in row
    else:
        assert shown in result.output


def test_a_hostile_dtype_config_name_stays_a_literal(tmp_path: Path) -> None:
    import json

    name = "a'b\"\"\"c\\ {x} __import__('os')"
    key = json.dumps(name)  # a YAML double-quoted string
    spec = tmp_path / "h.yaml"
    spec.write_text(
        f"name: h\ndtype_configs:\n  {key}: {{input_dtype: quint8, output_dtype: quint8}}\n"
        f"patterns:\n  - pattern: nn.ReLU\n    dtype_configs: [{key}]\n"
    )
    out = tmp_path / "h.py"
    result = runner.invoke(app, ["compile", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert list(runpy.run_path(str(out))["DTYPE_CONFIGS"]) == [name]
