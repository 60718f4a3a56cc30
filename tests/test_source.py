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


# Characters an editor and the parser read differently: line breaks YAML 1.1 and editors end
# lines at and YAML 1.2 and TOML do not, and bidi controls. Refused wherever they are (a
# comment, a plain or quoted string), at their own line and column; an escape is fine.
INVISIBLE = ["\x85", "\u2028", "\u2029", "\u202e", "\u2067"]


@pytest.mark.parametrize("char", INVISIBLE, ids=["nel", "u2028", "u2029", "rlo", "rli"])
@pytest.mark.parametrize("fmt", ["yaml", "toml"])
@pytest.mark.parametrize("where", ["comment", "plain", "quoted"])
def test_invisible_characters_are_refused_at_their_position(fmt, char, where):
    eq = ":" if fmt == "yaml" else " ="
    line = {
        "comment": f'name{eq} "a"  # note{char} x{eq} 1',
        "plain": f"name{eq} {'a' if fmt == 'yaml' else 1}{char}b",
        "quoted": f'name{eq} "a{char}b"',
    }[where]
    text = f'x-first{eq} "ok"\n{line}\n'
    with pytest.raises(SpecError) as info:
        parse(text, "x", fmt)
    (d,) = info.value.diagnostics
    assert (d.code, d.line, d.column) == ("BS110", 2, line.index(char) + 1)
    assert f"U+{ord(char):04X}" in d.message


@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_an_escaped_line_separator_is_text(fmt):
    text = 'name: "a\\u2028b"\n' if fmt == "yaml" else 'name = "a\\u2028b"\n'
    assert parse(text, "x", fmt).data == {"name": "a\u2028b"}
