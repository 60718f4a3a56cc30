"""backend_spec.files: the one writer. Exclusive temp files, modes kept, symlinks followed,
hard links kept, non-regular targets refused; and every CLI writer goes through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.files import WriteError, write_atomic

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = str(ROOT / "specs" / "tutorial.yaml")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_file_gets_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "new.py", "x = 1\n")
    finally:
        os.umask(old)
    assert mode(tmp_path / "new.py") == 0o644


@pytest.mark.parametrize("kept", [0o644, 0o755, 0o600])
def test_existing_mode_is_kept(tmp_path: Path, kept: int) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    target.chmod(kept)
    write_atomic(target, "new")
    assert mode(target) == kept and target.read_text() == "new"


def test_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text("old")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_hard_links_keep_sharing_the_file(tmp_path: Path) -> None:
    first = tmp_path / "a.yaml"
    first.write_text("old")
    second = tmp_path / "b.yaml"
    os.link(first, second)
    write_atomic(first, "new")
    assert second.read_text() == "new"
    assert os.stat(first).st_ino == os.stat(second).st_ino


def test_planted_tmp_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    golden = tmp_path / "g.json"
    (tmp_path / "g.json.tmp").symlink_to(victim)  # the fixed name the old writer used
    write_atomic(golden, "{}")
    assert victim.read_text() == "precious" and golden.read_text() == "{}"


@pytest.mark.parametrize("target", ["/dev/null", "DIR", "missing/out.py"])
def test_non_regular_targets_are_refused(tmp_path: Path, target: str) -> None:
    path = Path(target) if target.startswith("/") else tmp_path / target
    if target == "DIR":
        path.mkdir()
    with pytest.raises(WriteError):
        write_atomic(path, "x")
    assert not list(tmp_path.glob("**/.*.tmp"))


@pytest.mark.parametrize("target", ["/dev/null", "DIR", "missing/out.py"])
def test_cli_output_misuse_exits_2_on_one_line(tmp_path: Path, target: str) -> None:
    path = Path(target) if target.startswith("/") else tmp_path / target
    if target == "DIR":
        path.mkdir()
    result = CliRunner().invoke(app, ["compile", TUTORIAL, "-o", str(path)])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_fmt_keeps_mode_symlink_and_hard_link(tmp_path: Path) -> None:
    real = tmp_path / "spec.yaml"
    real.write_text("patterns:\n- pattern: nn.ReLU\nname: x\n")
    real.chmod(0o755)
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    hard = tmp_path / "hard.yaml"
    os.link(real, hard)
    result = CliRunner().invoke(app, ["fmt", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and mode(real) == 0o755
    assert real.read_text().startswith("name: x") and hard.read_text() == real.read_text()
