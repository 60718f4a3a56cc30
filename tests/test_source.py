"""Source stage: positions, YAML 1.2 scalars, refusals and bounds."""

from __future__ import annotations

import math

import pytest

from backend_spec.diagnostics import SpecError
from backend_spec.specfile.source import parse


def test_yaml_positions_of_keys_and_values():
    doc = parse("name: x\npatterns:\n  - pattern: [nn.Conv2d, nn.ReLU]\n", "f.yaml", "yaml")
    assert doc.where(("patterns", 0, "pattern", 1)) == (3, 26)
    assert doc.key_where(("patterns", 0, "pattern")) == (3, 5)
    assert doc.where(("patterns", 0, "missing", "deeper")) == (3, 5)


def test_yaml_core_schema_scalars():
    text = "a: 1\nb: 0x10\nc: 1.5e3\nd: .inf\ne: true\nf: ~\ng: '1'\nh: yes\ni: 0o17\n"
    data = parse(text, "f.yaml", "yaml").data
    assert data == {
        "a": 1,
        "b": 16,
        "c": 1500.0,
        "d": math.inf,
        "e": True,
        "f": None,
        "g": "1",
        "h": "yes",
        "i": 15,
    }


def test_anchors_aliases_and_merge_keys():
    text = "x-d: &d {dtype: quint8, quant_min_lower_bound: 0}\nout: {<<: *d, dtype: qint8}\n"
    data = parse(text, "f.yaml", "yaml").data
    assert data["out"] == {"dtype": "qint8", "quant_min_lower_bound": 0}


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a: !!int 3\n", "BS106"),
        ("--- \na: 1\n--- \nb: 2\n", "BS101"),
        ("? [a, b]\n: 1\n", "BS103"),
        ("a: 1\na: 2\n", "BS107"),
        ("a: " + "9" * 5000 + "\n", "BS105"),
        ("a: \x07\n", "BS102"),
    ],
)
def test_yaml_refusals(text, code):
    with pytest.raises(SpecError) as info:
        parse(text, "f.yaml", "yaml")
    assert info.value.diagnostics[0].code == code


def test_toml_positions_follow_tables_and_arrays_of_tables():
    text = (
        'name = "x"\n'
        "[dtype_configs.w]\n"
        'input_dtype = {dtype = "quint8", quant_min_lower_bound = 0}\n'
        "[[patterns]]\n"
        'pattern = "nn.Linear"\n'
        "[[patterns]]\n"
        'pattern = ["nn.Conv2d", "nn.ReLU"]\n'
        "[patterns.fuser_method]\n"
        'sequential = "nni.ConvReLU2d"\n'
    )
    doc = parse(text, "f.toml", "toml")
    assert doc.where(("dtype_configs", "w", "input_dtype", "quant_min_lower_bound")) == (3, 58)
    assert doc.where(("patterns", 1, "pattern", 1)) == (7, 25)
    assert doc.where(("patterns", 1, "fuser_method", "sequential")) == (9, 14)
    assert doc.key_where(("patterns", 0, "pattern")) == (5, 1)


def test_toml_syntax_error_has_line_and_column():
    with pytest.raises(SpecError) as info:
        parse('name = "x"\nbad = [1,\n', "f.toml", "toml")
    (d,) = info.value.diagnostics
    assert (d.code, d.line) == ("BS101", 3)


# Line separators YAML 1.1 (libyaml) breaks lines at and YAML 1.2 does not: inside a comment
# or a string they are text, kept as written, and every later position is on its real line.
SEPARATORS = ["\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=["nel", "u2028", "u2029"])
@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_line_separators_are_text_in_strings_and_comments(fmt, sep):
    if fmt == "yaml":
        text = f"name: a{sep}b  # note{sep} x: 1\nquoted: 'c{sep}d'\nafter: [1]\n"
    else:
        text = f'name = "a{sep}b"  # note{sep} x = 1\nquoted = "c{sep}d"\nafter = [1]\n'
    doc = parse(text, "x", fmt)
    assert doc.data == {"name": f"a{sep}b", "quoted": f"c{sep}d", "after": [1]}
    assert doc.where(("after",))[0] == 3
    assert doc.where(("after", 0))[0] == 3


def test_private_use_characters_are_not_mistaken_for_separators():
    text = "name: \ue000\ue001\u2028\ue002\n"  # stand-ins are picked among unused code points
    assert parse(text, "x", "yaml").data == {"name": "\ue000\ue001\u2028\ue002"}
