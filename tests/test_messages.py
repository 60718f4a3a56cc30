"""Messages a new user meets first, as data: each case is a spec text, the command that reads
it (``compile`` or ``lint``, as the CLI runs them), and what must be said, where.

``first`` is the (code, line, column) of the first error (of the first warning when there
is none); ``has`` more that must be there;
``not_at`` lines no diagnostic may point at (an anchor's definition, say); ``never`` words no
message or hint may hold. Whatever the case, a suggestion never names the key it rejects.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from backend_spec.lint.runner import compile_report, lint_path
from backend_spec.specfile.models import SpecModel

#: One more than the newest format version this bespec reads (computed: another version
#: may be added beside this test).
UNSUPPORTED = max(get_args(SpecModel.model_fields["spec_version"].annotation)) + 1

DEDENTED_UNDER_ANCHOR = """\
spec_version: 2
name: x
x-act: &act
  dtype: quint8
  observer: minmax
dtype_configs:
  act_only:
  input_dtype: *act
  output_dtype: *act
patterns:
  - pattern: nn.ReLU
    dtype_configs: [act_only]
"""

CASES = {
    # the indentation mistake: the cause first, at its own line; the dedented aliases at
    # their own lines, nothing inside the anchor's definition (lines 3-5)
    "dedented-under-anchor": dict(
        text=DEDENTED_UNDER_ANCHOR,
        command="compile",
        first=("BS203", 7, 12),
        has={("BS201", 8, 3), ("BS201", 9, 3)},
        not_at={3, 4, 5},
        never=["did you mean 'dtype'", "did you mean 'observer'"],
    ),
    # the same without an anchor: one finding per dedented key (not one per key inside it),
    # and no "unused dtype config 'input_dtype'" after it
    "dedented-keys": dict(
        text="name: x\ndtype_configs:\n  act_only:\n"
        "  input_dtype: {dtype: quint8, quant_min_lower_bound: 0}\n  output_dtype: quint8\n"
        "patterns:\n  - pattern: nn.ReLU\n    dtype_configs: [act_only]\n",
        command="lint",
        first=("BS203", 3, 12),
        has={("BS201", 4, 3), ("BS203", 5, 3)},
        count=3,
        words=["indent them under act_only"],
    ),
    # a dtype config named like a dtype key is still a dtype config
    "config-named-input_dtype": dict(
        text="name: x\ndtype_configs:\n  input_dtype: {dtype: quint8}\n",
        command="lint",
        first=("BS201", 3, 17),
        never=["did you mean 'dtype'"],
    ),
    "unsupported-version": dict(
        text=f"spec_version: {UNSUPPORTED}\nname: x\npatterns:\n"
        "  - pattern: nn.ReLU\n    output: never\n",
        command="compile",
        first=("BS204", 1, 15),
        count=1,
        never=["this file is spec_version"],
    ),
    # the dtype trap, as new users write it: a warning at the dtype from compile and lint
    "uint8-activations-compile": dict(
        text="name: x\ndtype_configs:\n  act: {input_dtype: uint8, output_dtype: quint8}\n"
        "patterns:\n  - {pattern: nn.ReLU, dtype_configs: [act]}\n",
        command="compile",
        first=("BS522", 3, 22),
        words=["quint8", "pt2e reads quint8 as uint8"],
    ),
    "int8-weight-lint": dict(
        text="name: x\npatterns:\n  - pattern: nn.Linear\n    dtype_configs:\n"
        "      - input_dtype: quint8\n        weight_dtype: int8\n"
        "    root_module: nn.Linear\n    reference_quantized_module: nnqr.Linear\n",
        command="lint",
        first=("BS522", 6, 23),
        words=["qint8", "Unsupported dtype and qscheme"],
    ),
    "int8-activation-toml": dict(
        text='name = "x"\n[[patterns]]\npattern = "nn.ReLU"\n'
        '[[patterns.dtype_configs]]\ninput_dtype = "int8"\n',
        command="lint",
        suffix=".toml",
        first=("BS522", 5, 15),
        words=["qint8"],
    ),
    # a fuser named as a factory call: the function itself, so the hint drops `call`
    "fuser-called-as-factory": dict(
        text="spec_version: 2\nname: x\npatterns:\n  - pattern: [nn.Conv2d, nn.BatchNorm2d]\n"
        "    fuser_method: {call: fuse_conv_bn}\n",
        command="compile",
        first=("BS305", 5, 26),
        words=["fuse_conv_bn(is_qat, conv, bn)", "'fuser_method: fuse_conv_bn' without call"],
    ),
    # a factory missing its arguments keeps the plain hint
    "factory-without-its-arguments": dict(
        text="spec_version: 2\nname: x\npatterns:\n  - pattern: [nn.Conv2d, nn.ReLU]\n"
        "    fuser_method: {call: get_fuser_method_new}\n",
        command="compile",
        first=("BS305", 5, 26),
        words=["check the arguments"],
    ),
}

_UNKNOWN = re.compile(r"unknown key '([^']*)'")


@pytest.mark.parametrize("name", sorted(CASES))
def test_message(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / f"spec{case.get('suffix', '.yaml')}"
    path.write_text(case["text"], encoding="utf-8")
    if case["command"] == "compile":
        _, found = compile_report(path)
    else:
        found = lint_path(path)
    shown = "\n".join(str(d) for d in found)
    assert found, "no diagnostic"
    lead = next((d for d in found if d.severity == "error"), found[0])  # the first error
    assert (lead.code, lead.line, lead.column) == case["first"], shown
    assert all(d.file == str(path) for d in found)
    assert case.get("has", set()) <= {(d.code, d.line, d.column) for d in found}, shown
    assert not [d for d in found if d.line in case.get("not_at", ())], shown
    if "count" in case:
        assert len(found) == case["count"], shown
    text = " ".join(f"{d.message} {d.hint}" for d in found)
    assert not [w for w in case.get("never", ()) if w in text], shown
    assert all(w in f"{lead.message} {lead.hint}" for w in case.get("words", ())), shown
    for d in found:  # a suggestion never names the key it rejects
        rejected = _UNKNOWN.search(d.message)
        assert not (rejected and f"'{rejected.group(1)}'" in (d.hint or "")), str(d)
