"""One backend reference (backend_spec.compiler.backends): a spec file, a built-in name or
module:attr, decided in one place and used by every command that takes a backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec._torch import BackendConfig
from backend_spec.cli.app import app
from backend_spec.compiler.backends import load_backend, load_compiled
from backend_spec.diagnostics import SpecError

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = str(ROOT / "specs" / "tutorial.yaml")
runner = CliRunner()


def _answer() -> BackendConfig:
    return BackendConfig("from_callable")


def _needs_an_argument(name: str) -> BackendConfig:
    return BackendConfig(name)


def _raises() -> BackendConfig:
    raise RuntimeError("boom")


CONFIG = BackendConfig("from_attribute")
NOT_A_CONFIG = 42


def test_the_three_spellings() -> None:
    assert load_backend("qnnpack").name == "qnnpack"
    assert load_backend(TUTORIAL).name == "my_backend"
    assert load_backend(f"{__name__}:CONFIG") is CONFIG
    assert load_backend(f"{__name__}:_answer").name == "from_callable"


def test_an_existing_file_wins_over_a_builtin_name(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "native").write_text("name: not_native\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError):  # read as a spec: "native" has no .yaml suffix
        load_backend("native")


def test_origins_name_where_patterns_came_from() -> None:
    builtin = load_compiled("x86")
    assert {o.source for o in builtin.origins.values()} == {"torch:x86"}
    imported = load_compiled(f"{__name__}:_answer")
    assert imported.origins == {}  # an empty config has no patterns
    spec = load_compiled(TUTORIAL)
    assert {o.source for o in spec.origins.values()} == {TUTORIAL}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("fbgem", "neither a spec file, a built-in backend"),
        ("no_such_module_xyz:x", "cannot import 'no_such_module_xyz'"),
        (f"{__name__}:missing", "has no attribute 'missing'"),
        (f"{__name__}:NOT_A_CONFIG", "is a int, not a BackendConfig"),
        (f"{__name__}:_needs_an_argument", "needs arguments"),
        (f"{__name__}:_raises", "calling .*_raises failed: RuntimeError: boom"),
        ("json:loads", "needs arguments"),
        ("sys:exit", "calling sys:exit failed: SystemExit"),
    ],
)
def test_unusable_references_are_one_line_value_errors(ref: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        load_backend(ref)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("ref", ["json:loads", "sys:exit", "os:sep", "fbgem"])
def test_export_of_an_unusable_reference_exits_2_with_one_line(ref: str) -> None:
    result = runner.invoke(app, ["export", ref])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bespec: error: "), result.output


def test_module_refs_import_from_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "bespec_cwd_backend.py").write_text(
        "from torch.ao.quantization.backend_config import BackendConfig\n"
        "def get_config():\n    return BackendConfig('from_cwd')\n"
    )
    monkeypatch.chdir(tmp_path)
    try:
        result = runner.invoke(app, ["export", "bespec_cwd_backend:get_config"])
    finally:
        sys.modules.pop("bespec_cwd_backend", None)
    assert result.exit_code == 0, result.output
    assert "name: from_cwd" in result.output


def test_file_refs(tmp_path: Path) -> None:
    module = tmp_path / "my_backend_file.py"
    module.write_text(
        "from torch.ao.quantization.backend_config import BackendConfig\n"
        "CONFIG = BackendConfig('from_file')\n"
    )
    assert load_backend(f"{module}:CONFIG").name == "from_file"


@pytest.mark.parametrize("command", ["show", "docs", "export"])
def test_commands_take_builtin_names(command: str) -> None:
    result = runner.invoke(app, [command, "qnnpack"])
    assert result.exit_code == 0, result.output
    assert "qnnpack" in result.output


def test_show_of_a_builtin_says_where_patterns_came_from() -> None:
    result = runner.invoke(app, ["show", "x86"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "torch:x86" in result.output


def test_diff_takes_module_refs() -> None:
    result = runner.invoke(app, ["diff", "fbgemm", f"{__name__}:_answer"])
    assert result.exit_code == 1, result.output
    assert "~ name: fbgemm -> from_callable\n" in result.output  # spec syntax, no reprs
    assert "- (nn.Conv2d, nn.ReLU)" in result.output
    assert "0 added," in result.output


def test_diff_of_a_bad_reference_exits_2() -> None:
    result = runner.invoke(app, ["diff", "fbgemm", "json:loads"])
    assert result.exit_code == 2
    assert "needs arguments" in result.output


@pytest.mark.parametrize("ref", ["sys:exit", "json:loads"])
def test_a_model_factory_that_exits_fails_its_model_not_the_check(ref: str) -> None:
    from backend_spec.check import run_check

    report = run_check(BackendConfig("empty"), models=[ref])
    (model,) = report.models
    assert model.status == "fail"
    assert ref in model.reason
