"""The command line: exit codes, standalone module output, schema, allow-list settings."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.analysis.compare import describe
from backend_spec.cli.app import app
from backend_spec.compiler.loader import load
from backend_spec.specfile.models import json_schema
from backend_spec.specfile.schema import COPIES, generated_text, schema_comment, schema_text
from backend_spec.specfile.source import parse

ROOT = Path(__file__).resolve().parent.parent
#: Where the repository's specs point editors: the top-level copy, seen from specs/.
REPO_SCHEMA_REF = f"../{COPIES[1].as_posix()}"
runner = CliRunner()


def test_compile_prints_a_summary():
    result = runner.invoke(app, ["compile", str(ROOT / "specs/tutorial.yaml")])
    assert result.exit_code == 0, result.output
    assert "my_backend" in result.output and "5 patterns" in result.output


@pytest.mark.parametrize("spec", ["tutorial.yaml", "tutorial.toml"])
def test_compile_output_module_rebuilds_the_same_config_without_bespec(tmp_path, spec):
    out = tmp_path / "my_backend.py"
    result = runner.invoke(app, ["compile", str(ROOT / "specs" / spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    rebuilt = runpy.run_path(str(out))["get_backend_config"]()
    assert describe(rebuilt) == describe(load(ROOT / "specs" / spec))
    check = (
        "import sys, runpy; runpy.run_path(sys.argv[1])['get_backend_config'](); "
        "print(sorted(m for m in sys.modules if m.startswith('backend_spec')))"
    )
    proc = subprocess.run([sys.executable, "-c", check, str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_compile_output_module_for_a_builtin_with_complex_patterns(tmp_path):
    spec = tmp_path / "child.yaml"
    spec.write_text("name: child\nextends: onednn\n")
    out = tmp_path / "onednn_module.py"
    result = runner.invoke(app, ["compile", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    rebuilt = runpy.run_path(str(out))["get_backend_config"]()
    assert describe(rebuilt) == describe(load(spec))


def test_bad_spec_exits_1_and_writes_no_output(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\npatterns:\n  - pattern: nn.Conv2D\n")
    out = tmp_path / "out.py"
    result = runner.invoke(app, ["compile", str(spec), "-o", str(out)])
    assert result.exit_code == 1
    assert f"{spec}:3:14: error BS300" in result.output
    assert "nn.Conv2d" in result.output
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [spec]


def test_misuse_exits_2(tmp_path):
    assert runner.invoke(app, ["compile", str(tmp_path / "missing.yaml")]).exit_code == 2
    assert runner.invoke(app, ["compile", "--no-such-option", "x.yaml"]).exit_code == 2
    assert runner.invoke(app, ["export", "no_such_backend"]).exit_code == 2


CUSTOM_SPEC = (
    "name: c\npatterns:\n  - pattern: [nn.Linear, nn.ReLU]\n"
    "    fused_module: nni.LinearReLU\n"
    "    fuser_method: bespec_custom_fusers.fuse_linear_relu\n"
)
ALLOW_CUSTOM = '[tool.bespec]\nallow_imports = ["bespec_custom_fusers"]\n'


def test_allow_imports_from_the_working_directory_pyproject(tmp_path, monkeypatch):
    spec = tmp_path / "specs" / "custom.yaml"
    spec.parent.mkdir()
    spec.write_text(CUSTOM_SPEC)
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["compile", str(spec)]).exit_code == 1
    allowed = ["compile", str(spec), "--allow-import", "bespec_custom_fusers"]
    assert runner.invoke(app, allowed).exit_code == 0
    (tmp_path / "pyproject.toml").write_text(ALLOW_CUSTOM)
    assert runner.invoke(app, ["compile", str(spec)]).exit_code == 0
    monkeypatch.chdir(spec.parent)  # the project is found upward from the working directory
    assert runner.invoke(app, ["compile", "custom.yaml"]).exit_code == 0


def test_a_pyproject_next_to_an_untrusted_spec_does_not_widen_the_allow_list(tmp_path, monkeypatch):
    untrusted = tmp_path / "downloads"
    untrusted.mkdir()
    (untrusted / "pyproject.toml").write_text(ALLOW_CUSTOM)
    spec = untrusted / "custom.yaml"
    spec.write_text(CUSTOM_SPEC)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    for command in (["compile"], ["show"], ["lint"], ["docs"]):
        result = runner.invoke(app, [*command, str(spec)])
        assert result.exit_code == 1, (command, result.output)
        assert "BS3" in result.output, (command, result.output)


@pytest.mark.parametrize("command", [["diff", "x86"], ["docs"], ["show"], ["export"]])
def test_backend_commands_honour_the_project_allow_list(tmp_path, monkeypatch, command):
    spec = tmp_path / "custom.yaml"
    spec.write_text(CUSTOM_SPEC)
    monkeypatch.chdir(tmp_path)
    refused = runner.invoke(app, [*command, str(spec)])
    assert refused.exit_code in (1, 2) and "BS3" in refused.output, refused.output
    (tmp_path / "pyproject.toml").write_text(ALLOW_CUSTOM)
    accepted = runner.invoke(app, [*command, str(spec)])
    # diff exits 1 because x86 and the spec differ; the others 0.
    assert accepted.exit_code == (1 if command[0] == "diff" else 0), accepted.output
    assert "LinearReLU" in accepted.output or "nn.Linear" in accepted.output


def test_shipped_schema_is_current():
    assert schema_text() == generated_text(), "run `make schema`"
    assert json.loads(schema_text()) == json_schema()


def test_both_schema_copies_equal_the_schema_command():
    printed = runner.invoke(app, ["schema"])
    assert printed.exit_code == 0
    assert COPIES[1].parts[0] == "schemas"  # the top-level folder editors and tools look in
    for copy in COPIES:
        assert (ROOT / copy).read_text(encoding="utf-8") == printed.stdout, "run `make schema`"


def test_the_wheel_ships_the_packaged_copy():
    import fnmatch

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = pyproject["tool"]["setuptools"]["package-data"]["backend_spec"]
    inside = COPIES[0].relative_to("backend_spec").as_posix()
    assert any(fnmatch.fnmatch(inside, glob) for glob in shipped)


def test_make_specs_points_at_the_top_level_schema():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"\nSCHEMA_REF := {REPO_SCHEMA_REF}\n" in makefile


def test_schema_command_prints_the_schema():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    pattern_props = schema["$defs"]["PatternModel"]["properties"]
    assert "pattern" in pattern_props and "fuser_method" in pattern_props
    assert schema["additionalProperties"] is False


def test_spec_files_point_editors_at_the_schema():
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        first = path.read_text().splitlines()[0]
        assert first == schema_comment("yaml", REPO_SCHEMA_REF)
        assert (path.parent / REPO_SCHEMA_REF).resolve().is_file()


def test_no_deprecation_noise_on_stderr(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "compile", str(ROOT / "specs/tutorial.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "deprecat" not in proc.stderr.lower()


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        (["export", "x86"], "yaml, toml"),
        (["lint", str(ROOT / "specs/tutorial.yaml")], "text, json, github, sarif"),
        (["diff", "x86", "x86"], "text, json"),
        (["check", "x86"], "text, json"),
        (["explain", "x86", "--model", "m:f"], "text, json"),
    ],
)
def test_a_bad_format_is_refused_before_any_work(command, choices):
    result = runner.invoke(app, [*command, "--format", "xml"])
    assert result.exit_code == 2
    words = " ".join(result.output.replace("│", " ").split())  # the usage box may wrap
    assert f"must be one of {choices}, not 'xml'" in words


def test_compile_keeps_lint_notes_out_of_its_warnings(tmp_path):
    spec = tmp_path / "identity.yaml"
    spec.write_text(
        "name: x\ndtype_configs:\n  int8: {input_dtype: quint8, output_dtype: quint8}\n"
        "patterns:\n  - pattern: nn.Identity\n    dtype_configs: [int8]\n"
    )
    lint = runner.invoke(app, ["lint", str(spec)])
    assert "info BS701" in lint.output  # a note: pt2e skips nn.Identity
    result = runner.invoke(app, ["compile", str(spec)])
    assert result.exit_code == 0, result.output
    assert "BS701" not in result.output and "warning" not in result.output


@pytest.mark.parametrize("flow", ["pt2e", "both"])
@pytest.mark.parametrize(
    "flags",
    [
        ["--golden", "g.json"],
        ["--update-golden", "--golden", "g.json"],
        ["--jobs", "2"],
    ],
)
def test_check_refuses_the_flags_a_flow_does_not_honour(flow, flags):
    # Each flag means the same under every --flow, or it is refused: never silently ignored.
    result = runner.invoke(app, ["check", "x86", "--flow", flow, *flags])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert flags[0] in line and f"--flow {flow}" in line, line


@pytest.mark.parametrize("flags", [["--torch-default"], ["--qconfig-mapping", "m:q"]])
def test_explain_pt2e_refuses_qconfig_choices(flags):
    result = runner.invoke(app, ["explain", "x86", "--model", "m:f", "--flow", "pt2e", *flags])
    assert result.exit_code == 2 and flags[0] in result.stderr, result.output


def test_an_unknown_flow_is_refused():
    assert runner.invoke(app, ["check", "x86", "--flow", "onnx"]).exit_code == 2
    assert runner.invoke(app, ["explain", "x86", "--model", "m:f", "--flow", "both"]).exit_code == 2


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("x.TOML", "toml"), ("x.Toml", "toml"), ("x.YML", "yaml"), ("x.Yaml", "yaml")],
)
def test_suffix_case_does_not_change_the_format_written_or_read(tmp_path, name, fmt):
    out = tmp_path / name
    result = runner.invoke(app, ["export", "fbgemm", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if fmt == "toml":  # TOML, not YAML under a TOML name
        assert parse(text, name, "toml").data["name"] == "fbgemm"
    else:
        assert "\nname: fbgemm\n" in text
    result = runner.invoke(app, ["compile", str(out)])
    assert result.exit_code == 0, result.output
    assert describe(load(out)) == describe(load(ROOT / "specs/fbgemm.yaml"))


def test_a_module_that_loads_torchao_leaves_no_torch_log_on_stderr(tmp_path):
    """torchao logs (through torch's logging, not warnings) a pytree deprecation when it loads;
    a Quantizer module ``export`` imports loads it before bespec does."""
    pytest.importorskip("torchao")
    (tmp_path / "loads_torchao.py").write_text("import torchao.quantization.pt2e\nthing = 1\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "export", "loads_torchao:thing"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), str(ROOT)))},
    )
    assert proc.returncode == 2, proc.stderr  # not a BackendConfig: misuse, on one line
    assert "register_constant" not in proc.stderr and "W1" not in proc.stderr
