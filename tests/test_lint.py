"""``bespec lint``: exit codes, selection, project settings, output formats, torch's built-ins."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.diagnostics import Severity
from backend_spec.lint import Selection, all_rules, lint_path, select_rules
from backend_spec.names.vocabulary import BUILTIN_BACKENDS

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"

CLEAN = "name: clean\npatterns:\n  - pattern: nn.ReLU\n"
#: one warning (BS507 unused dtype config)
WARNS = """\
name: warns
dtype_configs:
  spare: {input_dtype: quint8, output_dtype: quint8}
patterns:
  - pattern: nn.ReLU
"""
#: one error (BS501 duplicate), one warning (BS512), one loader error (BS300 unknown name)
BROKEN = """\
name: broken
patterns:
  - pattern: nn.ReLU
  - pattern: nn.ReLU
  - pattern: method:veiw
  - pattern: nn.NoSuchThing
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the working directory, with its own pyproject.toml (so the
    repository's settings do not apply)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.bespec]\n")
    for name, text in (("clean", CLEAN), ("warns", WARNS), ("broken", BROKEN)):
        (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


def test_exit_codes(project: Path) -> None:
    assert run("lint", str(project / "clean.yaml"))[0] == 0
    assert run("lint", str(project / "warns.yaml"))[0] == 0
    assert run("lint", "--strict", str(project / "warns.yaml"))[0] == 1
    assert run("lint", str(project / "broken.yaml"))[0] == 1
    assert run("lint", str(project / "clean.yaml"), str(project / "broken.yaml"))[0] == 1


def test_misuse_exits_2(project: Path) -> None:
    assert run("lint", str(project / "missing.yaml"))[0] == 2
    assert run("lint", "--format", "xml", str(project / "clean.yaml"))[0] == 2
    code, _, err = run("lint", "--select", "BS5O1", str(project / "clean.yaml"))
    assert code == 2 and "BS5O1" in err
    assert run("lint", "--no-such-option", str(project / "clean.yaml"))[0] == 2


def test_text_lines_and_loader_errors_alongside_rules(project: Path) -> None:
    code, out, _ = run("lint", str(project / "broken.yaml"))
    lines = [line for line in out.splitlines() if not line.startswith(" ")]
    path = str(project / "broken.yaml")
    assert lines == [
        f"{path}:3:14: error BS501 pattern nn.ReLU is given again at line 4; BackendConfig keeps "
        "only the last entry, so this one has no effect",
        f"{path}:5:14: warning BS512 torch.Tensor has no method 'veiw', "
        "so 'method:veiw' never matches",
        f"{path}:6:14: error BS300 unknown name 'nn.NoSuchThing'",
    ]


def test_severities_are_distinct(project: Path) -> None:
    found = {d.code: d.severity for d in lint_path(project / "broken.yaml")}
    assert found == {
        "BS501": Severity.ERROR,
        "BS512": Severity.WARNING,
        "BS300": Severity.ERROR,
    }


@pytest.mark.parametrize(
    ("options", "codes"),
    [
        (["--select", "BS501"], {"BS501", "BS300"}),
        (["--select", "duplicate"], {"BS501", "BS300"}),
        (["--ignore", "BS50,unmatchable-pattern"], {"BS300"}),
        (["--select", "BS5", "--ignore", "BS512"], {"BS501", "BS300"}),
    ],
)
def test_select_and_ignore(project: Path, options: list[str], codes: set[str]) -> None:
    _, out, _ = run("lint", "--format", "json", *options, str(project / "broken.yaml"))
    assert {item["code"] for item in json.loads(out)} == codes


def test_selection_by_prefix_and_slug() -> None:
    chosen = select_rules(Selection(select=("BS50",), ignore=("dead-fusion",)))
    assert [r.id for r in chosen] == [f"BS50{i}" for i in range(1, 10) if i != 2]
    with pytest.raises(ValueError, match="nope"):
        select_rules(Selection(ignore=("nope",)))


def test_project_settings(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.bespec.lint]\nignore = ["BS512"]\nstrict = true\n'
    )
    _, out, _ = run("lint", "--format", "json", str(project / "broken.yaml"))
    assert {item["code"] for item in json.loads(out)} == {"BS501", "BS300"}
    assert run("lint", str(project / "warns.yaml"))[0] == 1  # strict from pyproject
    (project / "pyproject.toml").write_text('[tool.bespec.lint]\nselect = ["BS8"]\n')
    assert run("lint", str(project / "clean.yaml"))[0] == 2


@pytest.mark.parametrize("command", ["compile", "lint"])
def test_a_pyproject_next_to_an_untrusted_spec_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # A downloaded spec comes with a pyproject.toml that would silence its findings and let
    # warnings pass; the project is the working directory's, so the file has no effect.
    untrusted = tmp_path / "downloads"
    untrusted.mkdir()
    (untrusted / "pyproject.toml").write_text(
        '[tool.bespec.lint]\nignore = ["BS5", "BS7"]\nstrict = false\n'
    )
    (untrusted / "warns.yaml").write_text(WARNS)
    here = tmp_path / "project"
    here.mkdir()
    (here / "pyproject.toml").write_text("[tool.bespec.lint]\nstrict = true\n")
    monkeypatch.chdir(here)
    code, out, err = run(command, str(untrusted / "warns.yaml"))
    assert "BS507" in out + err, (out, err)
    if command == "lint":
        assert code == 1  # strict from the working directory's project, not the spec's folder


def test_malformed_project_settings_exit_2_naming_the_key(project: Path) -> None:
    for text, key in (
        ("[tool.bespec]\nallow_imports = 3\n", "allow_imports"),
        ('[tool.bespec.lint]\nstrict = "yes"\n', "strict"),
        ("[tool.bespec.check]\nengine = 3\n", "engine"),
        ('[tool.bespec]\nallow_import = ["x"]\n', "allow_import"),
    ):
        (project / "pyproject.toml").write_text(text)
        code, _, err = run("compile", str(project / "clean.yaml"))
        assert code == 2 and key in err and "pyproject.toml" in err, (text, err)


def test_json_format(project: Path) -> None:
    _, out, _ = run("lint", "--format", "json", str(project / "broken.yaml"))
    items = json.loads(out)
    assert [(i["line"], i["column"], i["code"], i["severity"]) for i in items] == [
        (3, 14, "BS501", "error"),
        (5, 14, "BS512", "warning"),
        (6, 14, "BS300", "error"),
    ]


def test_github_format(project: Path) -> None:
    _, out, _ = run("lint", "--format", "github", str(project / "broken.yaml"))
    lines = out.splitlines()
    assert len(lines) == 3
    pattern = re.compile(r"^::(error|warning) file=[^,]+,line=\d+,col=\d+(,title=[^:]+)?::.+$")
    assert all(pattern.match(line) for line in lines), lines
    assert lines[1].startswith("::warning ") and ",line=5,col=14," in lines[1]


def test_sarif_format(project: Path) -> None:
    _, out, _ = run("lint", "--format", "sarif", str(project / "broken.yaml"))
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    (run_,) = sarif["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "bespec"
    rules = {r["id"]: r for r in driver["rules"]}
    assert {r.id for r in all_rules()} <= set(rules)
    assert rules["BS501"]["name"] == "duplicate-pattern"
    assert rules["BS501"]["helpUri"].endswith("docs/rules.md#bs501-duplicate-pattern")
    assert rules["BS512"]["defaultConfiguration"] == {"level": "warning"}
    results = run_["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("BS501", "error"),
        ("BS512", "warning"),
        ("BS300", "error"),
    ]
    for result in results:
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"].endswith("broken.yaml")
        assert physical["region"]["startLine"] >= 1


def test_help_anchors_exist_in_rules_doc() -> None:
    text = (ROOT / "docs" / "rules.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^## (.+)$", text, flags=re.M)
    }
    for rule in all_rules():
        assert rule.help_uri.rsplit("#", 1)[1] in anchors
        section = text.split(f"## {rule.id} {rule.name}", 1)[1].split("\n## ", 1)[0]
        assert f"Severity: {rule.severity.value}" in section
        assert "```yaml" in section and "Fix" in section


def test_unvalidated_file_reports_only_loader_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\npatterns:\n  - pattern: nn.ReLU\n    colour: red\n")
    assert [(d.code, d.line) for d in lint_path(path)] == [("BS201", 4)]


def _builtin_spec(name: str, tmp_path: Path) -> Path:
    committed = SPECS / f"{name}.yaml"
    if committed.is_file():
        return committed
    from backend_spec.compiler.backends import load_backend
    from backend_spec.export import dump

    path = tmp_path / f"{name}.yaml"
    path.write_text(dump(load_backend(name)))
    return path


#: Where torch's own configs are sloppy (documented in docs/rules.md): call_method patterns
#: for methods torch.Tensor does not have; a cat or stack sharing one observer in a backend
#: that leaves float ops torch's lowering runs quantized (BS530).
TORCH_KNOWN_WARNINGS = {
    "native": {("BS512", "method:hardsigmoid"), ("BS512", "method:hardsigmoid_")},
    "fbgemm": {("BS512", "method:hardsigmoid"), ("BS512", "method:hardsigmoid_")},
    "qnnpack": {("BS512", "method:hardsigmoid"), ("BS512", "method:hardsigmoid_")},
    "x86": {("BS512", "method:hardsigmoid"), ("BS512", "method:hardsigmoid_")},
    "onednn": {("BS512", "method:hardsigmoid"), ("BS512", "method:hardsigmoid_")},
    "executorch": {
        ("BS512", "method:leaky_relu"),
        ("BS530", "torch.cat"),
        ("BS530", "torch.concat"),
        ("BS530", "torch.concatenate"),
    },
    "tensorrt": {("BS530", "torch.cat"), ("BS530", "torch.stack")},
}


@pytest.mark.parametrize("name", list(BUILTIN_BACKENDS))
def test_torch_builtins_have_no_errors(name: str, tmp_path: Path) -> None:
    found = lint_path(_builtin_spec(name, tmp_path))
    assert [str(d) for d in found if d.severity is Severity.ERROR] == []
    warnings = {
        (d.code, (re.findall(r"'(method:\w+)'", d.message) or d.message.split())[0])
        for d in found
        if d.severity is not Severity.INFO  # BS701 notes: entries pt2e skips
    }
    assert warnings == TORCH_KNOWN_WARNINGS[name]


def test_tutorial_specs_are_clean() -> None:
    """No problem; the only notes are that pt2e has no counterpart of the FX QAT modules."""
    for name in ("tutorial.yaml", "tutorial.toml"):
        found = lint_path(SPECS / name)
        assert [d for d in found if d.code != "BS701"] == []
        # one summary line (the file uses no pt2e key), naming only the QAT classes
        assert len(found) == 1
        named = re.search(r"\((.*)\)", found[0].message).group(1).split(", ")
        assert named and all(name.startswith(("nnqat.", "nniqat.")) for name in named)


def test_a_crashing_rule_becomes_a_diagnostic(project: Path) -> None:
    import dataclasses

    def broken(context):
        raise RuntimeError("boom")
        yield  # pragma: no cover

    rule = dataclasses.replace(all_rules()[0], check=broken)
    found = lint_path(project / "clean.yaml", [rule])
    assert [(d.code, d.severity) for d in found] == [("BS599", Severity.ERROR)]
    assert "boom" in found[0].message


def test_text_colour_only_on_a_tty_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend_spec.cli.render.console import use_color

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())


def test_text_says_severity_in_words_with_or_without_colour(project: Path) -> None:
    from backend_spec.cli.render.diagnostics import render_text

    found = lint_path(project / "broken.yaml")
    for color in (False, True):
        text = render_text(found, color=color)
        assert "error BS501" in text and "warning BS512" in text
    assert "\x1b[" not in render_text(found)


def test_qat_class_outside_the_root_hierarchy_with_its_own_conversions_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """coremltools-style QAT classes convert themselves (from_float/to_float): not BS506; a
    class without them still is."""
    (tmp_path / "coreml_like.py").write_text(
        "import torch\n"
        "class ConvertsItself(torch.nn.Module):\n"
        "    _FLOAT_MODULE = torch.nn.Linear\n"
        "    @classmethod\n"
        "    def from_float(cls, mod): return cls()\n"
        "    def to_float(self): return torch.nn.Linear(1, 1)\n"
        "class DoesNot(torch.nn.Module):\n"
        "    _FLOAT_MODULE = torch.nn.Linear\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "qat.yaml"
    spec.write_text(
        "name: b\npatterns:\n"
        "  - pattern: nn.Linear\n    root_module: nn.Linear\n"
        "    qat_module: coreml_like.ConvertsItself\n"
        "  - pattern: F.linear\n    root_module: nn.Linear\n"
        "    qat_module: coreml_like.DoesNot\n",
        encoding="utf-8",
    )
    rules = select_rules(Selection(select=("BS506",)))
    found = lint_path(spec, rules, allow_imports=("coreml_like",))
    assert [(d.code, d.line) for d in found] == [("BS506", 8)], found


#: A spec naming something in every kind of name field: pattern (flat and complex format),
#: module fields, a named fuser, {sequential: X} and a factory call, getters, and remove.
#: _NAMES_WRITTEN lists each name as often as the spec writes it.
_EVERY_NAME_FIELD = """\
spec_version: 2
name: s
extends: fbgemm
remove: [nn.ConvTranspose1d]
patterns:
  - pattern: nn.Hardswish
  - pattern: [nn.Conv1d, nn.ReLU]
    fused_module: nni.ConvReLU1d
    fuser_method: {sequential: nni.ConvReLU1d}
  - pattern: nni.LinearReLU
    root_module: nn.Linear
    qat_module: nniqat.LinearReLU
    reference_quantized_module: nnqr.Linear
  - pattern: [nn.Conv3d, nn.BatchNorm3d]
    fuser_method: torch.ao.quantization.fuser_method_mappings.fuse_conv_bn
  - pattern_complex_format: [nn.ReLU6, [nn.BatchNorm2d, nn.Conv2d]]
    root_node_getter: _conv_bn_add_root_node_getter_left
    extra_inputs_getter: _conv_bn_add_extra_inputs_getter_left
  - pattern: [nn.Conv3d, nn.ReLU]
    fuser_method:
      call: torch.ao.quantization.fuser_method_mappings._sequential_wrapper2
      args: [nni.ConvReLU3d]
"""
_NAMES_WRITTEN = """nn.ConvTranspose1d nn.Hardswish nn.Conv1d nn.ReLU nni.ConvReLU1d nni.ConvReLU1d
nni.LinearReLU nn.Linear nniqat.LinearReLU nnqr.Linear nn.Conv3d nn.BatchNorm3d
torch.ao.quantization.fuser_method_mappings.fuse_conv_bn nn.ReLU6 nn.BatchNorm2d nn.Conv2d
_conv_bn_add_root_node_getter_left _conv_bn_add_extra_inputs_getter_left nn.Conv3d nn.ReLU
torch.ao.quantization.fuser_method_mappings._sequential_wrapper2 nni.ConvReLU3d"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", [("BS515", 4)]),  # compiles: the rules that read remove's name run too
        ("  - pattern: nn.NoSuchModule\n", [("BS502", 8), ("BS300", 23)]),  # does not compile
    ],
    ids=["compiles", "fails"],
)
def test_lint_resolves_every_name_once(tmp_path, monkeypatch, extra, expected):
    """The compiler records every name it resolves (each entry's in its ``Resolved``), and
    the checks and lint rules read that record: no name is looked up a second time, whether
    the spec compiles or another entry's name does not resolve."""
    from collections import Counter

    from backend_spec.lint import runner
    from backend_spec.names.resolver import Resolver

    asked: Counter[str] = Counter()

    class Counting(Resolver):
        """The lint run's resolver (the exporter's naming checks have their own)."""

        def lookup(self, name):
            asked[name] += 1
            return super().lookup(name)

    monkeypatch.setattr(runner, "Resolver", Counting)
    spec = tmp_path / "s.yaml"
    spec.write_text(_EVERY_NAME_FIELD + extra, encoding="utf-8")
    assert [(d.code, d.line) for d in runner.lint_path(spec)] == expected
    written = Counter(_NAMES_WRITTEN.split())
    assert {name: asked[name] for name in written} == dict(written)
