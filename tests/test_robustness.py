"""Random and mutated specs never escape SpecError (and never hit the internal-error path)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backend_spec

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL_YAML = (ROOT / "specs/tutorial.yaml").read_text()
TUTORIAL_TOML = (ROOT / "specs/tutorial.toml").read_text()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def outcome(text: str, fmt: str) -> None:
    try:
        backend_spec.loads(text, format=fmt)
    except backend_spec.SpecError as error:
        assert error.diagnostics
        assert all(d.code != "BS900" for d in error.diagnostics), error
        assert all(d.line >= 0 and d.column >= 0 for d in error.diagnostics)


@st.composite
def mutated(draw, base: str) -> str:
    text = base
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "replace", "swap_line"]))
        if action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 20)) :]
        elif action == "insert":
            junk = draw(
                st.sampled_from(
                    [
                        "[",
                        "]",
                        "{",
                        ":",
                        "- ",
                        "&a ",
                        "*a",
                        "!!",
                        "\t",
                        "nn.",
                        "x",
                        "0",
                        "-1e9",
                        '"',
                        "\n  ",
                        "=",
                        "<<: ",
                    ]
                )
            )
            text = text[:pos] + junk + text[pos:]
        elif action == "replace":
            text = text[:pos] + draw(st.text(max_size=5)) + text[pos + 5 :]
        else:
            lines = text.splitlines(keepends=True)
            if len(lines) > 2:
                i = draw(st.integers(0, len(lines) - 2))
                lines[i], lines[i + 1] = lines[i + 1], lines[i]
                text = "".join(lines)
    return text


@SETTINGS
@given(mutated(TUTORIAL_YAML))
def test_mutated_yaml_never_escapes(text):
    outcome(text, "yaml")


@SETTINGS
@given(mutated(TUTORIAL_TOML))
def test_mutated_toml_never_escapes(text):
    outcome(text, "toml")


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["nn.Linear", "quint8", "method:view", "F.relu", "torch.os.system"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "pattern",
                    "dtype_configs",
                    "input_dtype",
                    "dtype",
                    "name",
                    "root_module",
                    "fuser_method",
                    "sequential",
                    "patterns",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(["name", "patterns", "dtype_configs", "extends", "remove", "spec_version"]),
        values,
        max_size=5,
    )
)
def test_random_structures_never_escape(data):
    import json

    outcome(json.dumps(data), "yaml")  # JSON is YAML
