"""The supported torch range: declared once, checked at startup, data per minor version.

bespec is tested on every torch minor version of :data:`backend_spec.versions.TORCH_REQUIREMENT`
(``make test TORCH=...``; ``.ci/run`` runs both). Outside the range every command that needs
torch ends with one line, whether the version is wrong or the quantization API is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec._torch import torch
from backend_spec.cli.app import app
from backend_spec.pt2e import aten
from backend_spec.versions import (
    TORCH_END,
    TORCH_MIN,
    TORCH_REQUIREMENT,
    UnsupportedTorch,
    check_torch,
    installed,
    minor_text,
)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_declares_the_supported_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    torch_requirements = [d for d in project["dependencies"] if d.startswith("torch")]
    assert torch_requirements == [f"torch{TORCH_REQUIREMENT}"]
    assert f"torch{TORCH_REQUIREMENT}" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("2.13.0+cpu", True),
        ("2.13.0", True),
        ("2.13.1+cu126", True),
        ("2.14.1+cu130", True),
        ("2.14.0a0+git1234", True),
        ("2.12.1", False),
        ("2.11.0", False),
        ("2.15.0", False),
        ("3.0.0", False),
        ("not a version", False),
    ],
)
def test_check_torch_accepts_exactly_the_supported_minor_versions(
    version: str, supported: bool
) -> None:
    if supported:
        check_torch(version)
    else:
        with pytest.raises(UnsupportedTorch, match=f"needs torch{TORCH_REQUIREMENT}"):
            check_torch(version)


def test_every_supported_minor_version_ships_an_aten_table() -> None:
    assert (TORCH_MIN[0], TORCH_END[0]) == (2, 2), "update this test for another major version"
    for minor in range(TORCH_MIN[1], TORCH_END[1]):
        path = aten.table_path(f"2.{minor}")
        assert path.is_file(), f"run `make aten-table TORCH=2.{minor}.x`"
        assert f'"torch": "2.{minor}"' in path.read_text(encoding="utf-8")
    assert minor_text(torch.__version__) == aten.TORCH_MINOR


_PATCHED_TORCH = """
import sys, torch
{patch}
sys.argv = ["bespec", *sys.argv[1:]]
from backend_spec.cli import main
main()
"""


def _bespec_with(patch: str, *args: str, env: dict[str, str] | None = None):
    script = _PATCHED_TORCH.format(patch=patch)
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ('torch.__version__ = "2.11.0"', "torch 2.11.0 is not supported"),
        ('torch.__version__ = "2.15.0+cpu"', "torch 2.15.0+cpu is not supported"),
        ('sys.modules["torch.ao.quantization"] = None', "cannot be used (ModuleNotFoundError"),
        (
            "import torch.ao.quantization.backend_config as m; del m.BackendPatternConfig",
            "cannot be used (ImportError",
        ),
    ],
)
def test_an_unusable_torch_ends_any_command_in_one_line(patch: str, says: str) -> None:
    done = _bespec_with(patch, "lint", "specs/tutorial.yaml")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("bespec: error: ") and says in done.stderr
    assert f"needs torch{TORCH_REQUIREMENT}" in done.stderr


def test_version_shows_torch_and_torchao() -> None:
    shown = CliRunner().invoke(app, ["--version"]).output
    assert f"torch {torch.__version__} (supported: {TORCH_REQUIREMENT})" in shown
    assert f"torchao {installed('torchao') or 'not installed'}" in shown


#: What a broken torch build raises on ``import torch`` (its ``__init__.py`` here).
BROKEN_IMPORTS = {
    "missing-cuda-library": 'raise ImportError("libtorch_cuda.so: cannot open shared object '
    'file: No such file or directory")',
    "oserror": 'raise OSError(8, "Exec format error", "libc10.so")',
    "runtimeerror": 'raise RuntimeError("CUDA driver initialization failed\\nsecond line")',
    "half-imported": "import sys\nsys.modules['torch.nn'] = None\nimport torch.nn",
}
#: Every command that needs torch, and the command line's version flag.
TORCH_COMMANDS = [
    ["--version"],
    ["lint", "--no-cache", "spec.yaml"],
    ["compile", "spec.yaml"],
    ["compile", "spec.yaml", "--target", "pt2e"],
    ["show", "spec.yaml"],
    ["check", "spec.yaml"],
    ["explain", "spec.yaml", "--model", "model:make"],
    ["diff", "spec.yaml", "x86"],
    ["docs", "spec.yaml"],
    ["export", "x86"],
    ["export", "model:make"],
]


#: Every command with the first failure; the other failures with two commands (each run is a
#: fresh process: keep them few).
BROKEN_CASES = [("missing-cuda-library", args) for args in TORCH_COMMANDS] + [
    (broken, args)
    for broken in sorted(BROKEN_IMPORTS)
    if broken != "missing-cuda-library"
    for args in (["--version"], ["compile", "spec.yaml"])
]


@pytest.mark.parametrize(
    ("broken", "args"), BROKEN_CASES, ids=[f"{b}-{a[0]}" for b, a in BROKEN_CASES]
)
def test_a_torch_that_cannot_be_imported_ends_every_command_in_one_line(
    broken: str, args: list[str], tmp_path: Path
) -> None:
    """Whatever ``import torch`` raises, each command prints the one-line refusal with the
    reason and exits 2; no traceback. (The fake torch fails before anything heavy loads, so
    these processes are quick.)"""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(BROKEN_IMPORTS[broken] + "\n", encoding="utf-8")
    (tmp_path / "spec.yaml").write_text((ROOT / "specs" / "tutorial.yaml").read_text("utf-8"))
    (tmp_path / "model.py").write_text("import torch\n\ndef make():\n    return None\n")
    path = os.pathsep.join([str(tmp_path / "fake"), str(ROOT), str(tmp_path)])
    env = {**os.environ, "PYTHONPATH": path, "BESPEC_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "backend_spec", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 2, shown
    assert "Traceback" not in shown and shown.count("\n") == 1, shown
    assert shown.startswith("bespec: error: torch cannot be imported ("), shown
    assert "install a supported torch" in shown, shown


def test_version_reports_the_torch_that_runs_not_its_package_metadata(tmp_path: Path) -> None:
    """A torch earlier on the path than the installed package is the one that runs."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "2.13.99+shadow"\n', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "backend_spec", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "torch 2.13.99+shadow (supported:" in done.stdout


def test_a_build_without_its_tag_uses_the_packaged_table(tmp_path: Path) -> None:
    """``2.13.0`` (no ``+cpu``) and any ``+cuXXX`` build read the minor version's table: lint
    traces nothing (tracing would exit 97) and prints no trace warning."""
    untagged = str(torch.__version__).split("+")[0]
    patch = (
        f"torch.__version__ = {untagged!r}\n"
        "import os\n"
        "from backend_spec.pt2e import aten\n"
        "aten.trace_op = lambda op: os._exit(97)\n"
    )
    cache = {"BESPEC_CACHE_DIR": str(tmp_path)}
    done = _bespec_with(patch, "lint", "specs/x86.yaml", "specs/native.yaml", env=cache)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "warn(" not in done.stderr
    assert not list(tmp_path.glob("aten-traces*"))  # nothing needed tracing, so none cached


def test_traces_outside_the_table_are_cached_on_disk(monkeypatch, tmp_path: Path) -> None:
    """An op the packaged table lacks (every op, here) is traced once; the next process reads
    the trace from the cache file instead of tracing again."""
    monkeypatch.setenv("BESPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(aten, "_packaged", lambda: {})
    for cached in (aten._disk_cache, aten._traced):
        cached.cache_clear()
    try:
        first = aten.describe_op(torch.nn.Hardtanh)
        assert "chain" in first
        assert "nn.Hardtanh" in aten.cache_path().read_text(encoding="utf-8")
        assert aten.cache_path().parent == tmp_path / "cache"
        for cached in (aten._disk_cache, aten._traced):  # as in a new process
            cached.cache_clear()

        def no_trace(op):
            raise AssertionError(f"traced {op} again")

        monkeypatch.setattr(aten, "trace_op", no_trace)
        assert aten.describe_op(torch.nn.Hardtanh) == first
    finally:
        for cached in (aten._disk_cache, aten._traced):
            cached.cache_clear()


def test_a_torn_or_hostile_cache_file_is_ignored(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BESPEC_CACHE_DIR", str(tmp_path))
    aten.cache_path().write_text('{"ops": {"nn.ReLU": "rm -rf /", "nn.Tanh": {"chain": 1}}}')
    aten._disk_cache.cache_clear()
    try:
        assert aten._disk_cache() == {}
        aten.cache_path().write_text('{"ops": {"nn.ReL')
        aten._disk_cache.cache_clear()
        assert aten._disk_cache() == {}
    finally:
        aten._disk_cache.cache_clear()


_GC_PROBE = """
import gc, sys
{before}
import backend_spec._torch
print(gc.isenabled(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(
    ("before", "frozen"),
    [("", True), ("import torch", False)],
    ids=["bespec-imports-torch", "caller-imported-torch"],
)
def test_torch_import_leaves_collection_on_and_freezes_only_its_own_objects(
    before: str, frozen: bool
) -> None:
    """The import runs with collection off (it would traverse torch's objects over and over),
    then freezes what it built; a caller's objects, maybe garbage, are never frozen."""
    probe = _GC_PROBE.format(before=before)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", str(frozen)]
