"""What a user of the installed package meets: version, schema, init, completion, startup
without torch, file modes, and the Python API without torch's deprecation noise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import backend_spec
from backend_spec.cli.app import app
from backend_spec.specfile.schema import SCHEMA_NAME, schema_comment, schema_text

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

LIGHT_COMMANDS = """
import sys
from typer.testing import CliRunner
from backend_spec.cli.app import app
runner = CliRunner()
for args in (["--help"], ["schema"], ["schema", "-o", "s.json"],
             ["init", "light"], ["fmt", "--check", "light.yaml"], ["init", "--help"]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
heavy = sorted(m for m in ("torch", "pydantic", "rich.table") if m in sys.modules)
print(heavy)
"""


def test_light_commands_do_not_import_torch(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", LIGHT_COMMANDS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    heavy = proc.stdout.strip()
    assert "torch" not in heavy, heavy  # typer itself imports pydantic: not ours to avoid


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == f"bespec {backend_spec.__version__}"


def test_schema_is_shipped_and_written(tmp_path: Path) -> None:
    printed = runner.invoke(app, ["schema"])
    assert printed.exit_code == 0 and printed.stdout == schema_text()
    out = tmp_path / "schema.json"
    assert runner.invoke(app, ["schema", "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text())["title"] == "bespec backend spec"
    assert out.stat().st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_init_writes_a_starter_that_compiles_lints_and_is_formatted(tmp_path: Path) -> None:
    import jsonschema
    from ruamel.yaml import YAML

    for fmt in ("yaml", "toml"):
        out = tmp_path / f"npu.{fmt}"
        result = runner.invoke(app, ["init", "npu", "-o", str(out)])
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert text.splitlines()[0] == schema_comment(fmt)
        schema = json.loads((tmp_path / SCHEMA_NAME).read_text())  # where the comment points
        if fmt == "yaml":
            jsonschema.validate(YAML(typ="safe").load(text), schema)
        assert runner.invoke(app, ["compile", str(out)]).exit_code == 0
        assert runner.invoke(app, ["lint", str(out)]).exit_code == 0
        assert runner.invoke(app, ["fmt", "--check", str(out)]).exit_code == 0
        assert backend_spec.load(out).name == "npu"
    again = runner.invoke(app, ["init", "npu", "-o", str(tmp_path / "npu.yaml")])
    assert again.exit_code == 2 and "--force" in again.output
    bad = runner.invoke(app, ["init", "../escape"])
    assert bad.exit_code == 2 and "not a backend name" in bad.output


def test_export_schema_reference_works_where_the_file_is(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    out = tmp_path / "specs" / "x86.yaml"
    assert runner.invoke(app, ["export", "x86", "-o", str(out)]).exit_code == 0
    assert out.read_text().splitlines()[0] == schema_comment("yaml")
    assert (out.parent / SCHEMA_NAME).read_text() == schema_text()
    other = tmp_path / "other.toml"
    url = "https://example.org/backend-spec.schema.json"
    assert (
        runner.invoke(app, ["export", "x86", "-o", str(other), "--schema-ref", url]).exit_code == 0
    )
    assert other.read_text().splitlines()[0] == f"#:schema {url}"
    assert not (tmp_path / SCHEMA_NAME).exists()  # an explicit reference writes no copy


def test_compile_output_is_world_readable(tmp_path: Path) -> None:
    out = tmp_path / "backend.py"
    result = runner.invoke(app, ["compile", str(ROOT / "specs" / "tutorial.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()
    out.chmod(0o600)  # an existing file keeps its mode, as with open(path, "w")
    assert (
        runner.invoke(
            app, ["compile", str(ROOT / "specs" / "tutorial.yaml"), "-o", str(out)]
        ).exit_code
        == 0
    )
    assert out.stat().st_mode & 0o777 == 0o600


def test_shell_completion() -> None:
    # --show-completion then takes the shell named here, instead of detecting the shell from
    # the process tree (make's sh, an agent's runner...), which made the test depend on it.
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1",
    }
    command = [sys.executable, "-m", "backend_spec"]
    script = subprocess.run(
        [*command, "--show-completion", "bash"], capture_output=True, text=True, env=env
    )
    assert script.returncode == 0, script.stderr
    assert "complete -o default -F _bespec_completion bespec" in script.stdout
    completing = {**env, "_BESPEC_COMPLETE": "complete_bash", "COMP_CWORD": "1"}
    words = subprocess.run(
        command, capture_output=True, text=True, env={**completing, "COMP_WORDS": "bespec sh"}
    )
    assert words.stdout.split() == ["show"]
    backends = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**completing, "COMP_CWORD": "2", "COMP_WORDS": "bespec show f"},
    )
    assert backends.stdout.split() == ["fbgemm"]


API_WITHOUT_NOISE = """
import warnings
# torch and ruamel add filters of their own when first imported; a caller that uses bespec has
# them too. What must not change is the list once they are in.
import torch, ruamel.yaml
before = list(warnings.filters)
import backend_spec
bc = backend_spec.load("specs/tutorial.yaml")
with open("specs/tutorial.toml") as handle:
    backend_spec.loads(handle.read(), format="toml")
backend_spec.dump(bc)
backend_spec.qconfig_mapping(bc)
assert warnings.filters == before, "the caller's warning filters changed"
print("done")
"""


def test_api_prints_no_deprecation_warnings_and_keeps_the_callers_filters() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", API_WITHOUT_NOISE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    assert proc.stderr == "", proc.stderr


def test_pre_commit_hooks_never_install_torch_themselves() -> None:
    from ruamel.yaml import YAML

    hooks = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {hook["id"] for hook in hooks} == {"bespec-lint", "bespec-fmt"}
    for hook in hooks:
        assert hook["language"] == "system", hook["id"]  # the user's environment, no installs
        assert hook["entry"].startswith("bespec ")


def test_license_is_declared_as_spdx_and_shipped() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "BSD-3-Clause"
    assert project["project"]["license-files"] == ["LICENSE"]
    assert "BSD 3-Clause License" in (ROOT / "LICENSE").read_text()
    # setuptools reads SPDX license strings without deprecation warnings from version 77 on
    assert "setuptools>=77" in project["build-system"]["requires"]
    package_data = project["tool"]["setuptools"]["package-data"]["backend_spec"]
    for pattern in package_data:  # every declared file exists (the schema did not, once)
        assert list((ROOT / "backend_spec").glob(pattern)), pattern
    assert "schema/*.json" in package_data
