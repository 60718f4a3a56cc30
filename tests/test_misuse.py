"""Misuse and hostile text at the edges: terminal escapes, markup, API and CLI misuse, and
``extends`` confinement (docs/security.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import backend_spec
from backend_spec import SpecError
from backend_spec.cli.app import app
from backend_spec.cli.render.console import escape

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = str(ROOT / "specs" / "tutorial.yaml")
HOSTILE_NAME = '"\\e[2K\\e]8;;http://x\\a[/] [link=http://x]y[/link] \\u202e\\x85 z"'


def spec_with_name(tmp_path: Path, name: str = HOSTILE_NAME) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: {name}\npatterns:\n  - pattern: nn.ReLU\n")
    return spec


@pytest.mark.parametrize("command", ["compile", "show"])
def test_markup_and_escapes_in_a_name_print_literally(tmp_path: Path, command: str) -> None:
    result = CliRunner().invoke(app, [command, str(spec_with_name(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "\\x1b[2K" in result.stdout and "[/]" in result.stdout and "[link=" in result.stdout


def test_a_newline_in_a_name_cannot_forge_a_diagnostic_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "x"\n[[patterns]]\npattern = "nn.Nope\\ntests/x.yaml:1:1: BS000 forged"\n'
    )
    result = CliRunner().invoke(app, ["compile", str(spec)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert not any(line.startswith("tests/x.yaml") for line in lines)
    assert "\\x0atests/x.yaml:1:1" in result.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.characters(max_codepoint=0x206F), max_size=30))
def test_escape_leaves_no_control_or_bidi_character(text: str) -> None:
    shown = escape(text)
    assert not any(
        ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0x2028 <= ord(c) <= 0x202E for c in shown
    )
    assert all(c in shown for c in text if c.isalnum())


@pytest.mark.parametrize(
    "args",
    [
        ["compile", TUTORIAL, "--allow-import", "bad name"],
        ["compile", TUTORIAL, "--allow-import", "os;rm"],
        ["export", "json:loads"],
        ["export", "sys:exit"],
        ["export", "os:getcwd"],
    ],
)
def test_cli_misuse_exits_2_with_one_line(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_explain_with_a_fuser_that_does_not_fit(tmp_path: Path) -> None:
    """The compiler proves each fuser on float modules of its pattern, so a fuser that cannot
    fuse them is a spec error at the fuser, before explain runs any model."""
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\npatterns:\n  - pattern: [nn.Conv2d, nn.BatchNorm2d]\n"
        "    fuser_method: fuse_linear_bn\n"
    )
    model = "backend_spec.analysis.explain:tutorial_model"
    result = CliRunner().invoke(app, ["explain", str(spec), "--model", model])
    assert result.exit_code == 1
    assert f"{spec}:4:19: error BS307" in result.stderr, result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: backend_spec.loads(b"name: x\n"), "bytes"),
        (lambda: backend_spec.loads(None), "NoneType"),
        (lambda: backend_spec.load(None), "NoneType"),
        (lambda: backend_spec.loads("name: x\n", allow_imports="torch"), "single string"),
    ],
)
def test_api_misuse_is_a_clear_type_error(call, word: str) -> None:
    with pytest.raises(TypeError, match=word):
        call()


def extends_error(spec: Path, **options: bool) -> SpecError:
    with pytest.raises(SpecError) as info:
        backend_spec.load(spec, **options)
    return info.value


def test_extends_outside_the_folder_is_refused_and_never_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("name: x\npassword_hunter2: 1\n")
    project = tmp_path / "project"
    project.mkdir()
    spec = project / "spec.yaml"
    for target in ("../secret.yaml", str(secret)):
        spec.write_text(f"name: x\nextends: {target}\n")
        (diagnostic,) = extends_error(spec).diagnostics
        assert (diagnostic.code, diagnostic.line) == ("BS402", 2)
        assert "outside" in diagnostic.message
    allowed = extends_error(spec, allow_extends_outside=True)
    assert "hunter2" not in str(allowed) and "password" not in str(allowed)


def test_symlinks_cannot_lead_extends_out(tmp_path: Path) -> None:
    outside = tmp_path / "base.yaml"
    outside.write_text("name: base\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "base.yaml").symlink_to(outside)
    (project / "loop.yaml").symlink_to(project / "loop.yaml")
    spec = project / "spec.yaml"
    for target, word in (("base.yaml", "outside"), ("loop.yaml", "")):
        spec.write_text(f"name: x\nextends: {target}\n")
        (diagnostic,) = extends_error(spec).diagnostics
        assert (diagnostic.code, diagnostic.line) == ("BS402", 2) and word in diagnostic.message


def test_extends_inside_the_folder_still_works(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.yaml").write_text("name: b\npatterns:\n  - pattern: nn.ReLU\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nextends: sub/base.yaml\n")
    assert len(backend_spec.load(spec).configs) == 1
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert len(backend_spec.loads("name: x\nextends: sub/base.yaml\n").configs) == 1
    finally:
        os.chdir(cwd)


_PATH_PIECES = st.sampled_from(["..", "/", "a", "b.yaml", "\x00", "~", "\\", "x" * 300, "."])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_PATH_PIECES, min_size=1, max_size=20).map("".join))
def test_fuzzed_extends_paths_fail_at_the_extends_line(target: str) -> None:
    """No such base exists under tests/hostile: every path fails, at line 2, with BS402."""
    with pytest.raises(SpecError) as info:
        backend_spec.loads(f"name: x\nextends: {json.dumps(target)}\n", base_dir=ROOT / "tests")
    assert [(d.code, d.line) for d in info.value.diagnostics] == [("BS402", 2)], str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("command", ["compile", "fmt", "lint"])
def test_cli_refuses_fifo_and_device_specs_without_reading(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    for path in (fifo, zero):
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == 2, result.output
        assert "not a regular file" in result.stderr


@pytest.mark.parametrize(
    ("name", "where"), [("fmt_alias_bomb.yaml", ":8:"), ("deep_3000.yaml", ":2:")]
)
def test_fmt_refuses_what_compile_refuses_and_leaves_the_file(
    tmp_path: Path, name: str, where: str
) -> None:
    spec = tmp_path / name
    original = (ROOT / "tests" / "hostile" / name).read_bytes()
    spec.write_bytes(original)
    result = CliRunner().invoke(app, ["fmt", str(spec)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{spec}{where}") and "Traceback" not in result.output
    assert spec.read_bytes() == original


@pytest.mark.parametrize("jobs", ["0", "-1"])
def test_check_refuses_a_job_count_below_one(jobs: str) -> None:
    result = CliRunner().invoke(app, ["check", TUTORIAL, "-j", jobs])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--jobs'" in result.stderr


def test_check_starts_at_most_one_worker_per_cpu_and_case(monkeypatch) -> None:
    """Each worker imports torch: ``-j 100000`` must not start 100,000 processes."""
    from backend_spec.check import parallel

    started: list[int] = []

    class Refused(Exception):
        pass

    def pool(max_workers: int, **_: object) -> None:
        started.append(max_workers)
        raise Refused

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", pool)
    source = parallel.BackendSource.of(TUTORIAL)
    for count in (3, 100_000):
        with pytest.raises(Refused):
            parallel.check_cases(source, "x86", count, jobs=100_000)
    cpus = os.cpu_count() or 1
    assert started == [min(3, cpus), cpus]
