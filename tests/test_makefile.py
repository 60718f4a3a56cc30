"""The Makefile installs torch's CPU build: torch's CPU index is an extra index of the torch
step only (PyPI and local wheels still count), ``TORCH_INDEX`` overrides it (empty: none), and
an unreachable index costs one retry. Read from ``make -n`` (nothing is run or installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Run from ``make test TORCH=2.14.1``, the outer make hands its command-line variables to every
# make below it (MAKEFLAGS), and those would override the assignments under test.
_OUTER_MAKE = frozenset(
    {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH", "TORCH_INDEX", "VENV"}
)

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _recipe(tmp_path: Path, *assignments: str) -> list[str]:
    """The commands ``make`` would run to build a venv at ``tmp_path`` (dry run)."""
    venv = tmp_path / "venv"
    env = {key: value for key, value in os.environ.items() if key not in _OUTER_MAKE}
    done = subprocess.run(
        ["make", "-n", "-B", f"VENV={venv}", *assignments, f"{venv}/.installed"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if " -m pip install" in line]


@pytest.mark.parametrize(
    ("assignments", "torch_args"),
    [
        ((), f"torch==2.13.0 --extra-index-url {CPU_INDEX}"),
        (("TORCH=2.14.1",), f"torch==2.14.1 --extra-index-url {CPU_INDEX}"),
        (("TORCH_INDEX=file:///srv/wheels",), "torch==2.13.0 --extra-index-url file:///srv/wheels"),
        (("TORCH_INDEX=",), "torch==2.13.0"),
    ],
    ids=["default", "torch 2.14", "own index", "no index"],
)
def test_torch_comes_from_the_cpu_index_unless_overridden(
    tmp_path: Path, assignments: tuple[str, ...], torch_args: str
) -> None:
    installs = _recipe(tmp_path, *assignments)
    (torch_line,) = [line for line in installs if " torch==" in line]
    assert torch_line.rstrip().endswith(f"--retries 1 {torch_args}")
    others = [line for line in installs if line is not torch_line]
    assert others and not any("index-url" in line for line in others)
