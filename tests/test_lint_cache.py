"""The lint result cache: what it keys on, what it refuses to cache, and that a hit is light."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend_spec.lint import cache
from backend_spec.lint.session import lint_files
from backend_spec.settings import LintSettings

ROOT = Path(__file__).resolve().parent.parent

SPARE = """\
name: spare
dtype_configs:
  used: {input_dtype: quint8, output_dtype: quint8}
  spare: {input_dtype: quint8, output_dtype: quint8}
patterns:
  - pattern: nn.ReLU
    dtype_configs: [used]
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("BESPEC_CACHE_DIR", str(where))
    monkeypatch.delenv("BESPEC_NO_CACHE", raising=False)
    return where / "lint"


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.exists() else []


def codes_of(path: Path, **kwargs: object) -> list[tuple[str, int]]:
    report = lint_files([path], **kwargs)  # type: ignore[arg-type]
    return [(str(d.code), d.line) for d in report.diagnostics]


def test_a_second_run_is_answered_from_the_cache_unchanged(tmp_path: Path, folder: Path) -> None:
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    first = lint_files([spec]).diagnostics
    assert [str(d.code) for d in first] == ["BS507"]
    assert len(entries(folder)) == 1
    again = lint_files([spec]).diagnostics
    assert again == first
    assert [(d.hint, d.severity, d.key_path) for d in again] == [
        (d.hint, d.severity, d.key_path) for d in first
    ]


def test_the_cache_is_what_answers(tmp_path: Path, folder: Path) -> None:
    """A sealed entry under the file's key answers; the same entry edited by hand does not."""
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    lint_files([spec])
    (entry,) = entries(folder)
    key = entry.stem
    (found,) = lint_files([spec]).diagnostics
    cache.store(key, [dataclasses.replace(found, message="from the cache")], [])
    assert [d.message for d in lint_files([spec]).diagnostics] == ["from the cache"]
    assert "from the cache" not in lint_files([spec], use_cache=False).diagnostics[0].message
    stored = json.loads(entry.read_text())
    stored["diagnostics"][0]["message"] = "edited"
    entry.write_text(json.dumps(stored))
    assert [d.message for d in lint_files([spec]).diagnostics] == [found.message]


def test_an_edit_a_selection_or_a_suppression_misses(tmp_path: Path, folder: Path) -> None:
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    assert codes_of(spec) == [("BS507", 4)]
    spec.write_text(SPARE.replace("  spare: {input_dtype: quint8, output_dtype: quint8}\n", ""))
    assert codes_of(spec) == []
    spec.write_text(
        SPARE.replace(
            "output_dtype: quint8}\npatterns", "output_dtype: quint8}  # noqa: BS507\npatterns"
        )
    )
    assert codes_of(spec) == []
    spec.write_text(SPARE)
    assert codes_of(spec, settings=LintSettings(ignore=("BS507",))) == []
    assert codes_of(spec) == [("BS507", 4)]
    assert len(entries(folder)) == 4


def test_a_result_keeps_the_base_files_it_read(tmp_path: Path, folder: Path) -> None:
    """A child's entry lists its base (found by the loader, whatever the spelling); edits
    under a cached child are tests/test_cache_attacks.py's. An allow-list is never cached."""
    base = tmp_path / "base.yaml"
    base.write_text(SPARE)
    child = tmp_path / "child.yaml"
    child.write_text("{extends: base.yaml, name: child}\n")
    lint_files([child])
    (entry,) = entries(folder)
    (read,) = json.loads(entry.read_text())["reads"]
    assert read[0] == str(tmp_path / "base.yaml") and str(base.stat().st_size) in read[1]
    lint_files([base], allow_imports=["json"])
    assert entries(folder) == [entry]


def test_a_broken_entry_is_replaced(tmp_path: Path, folder: Path) -> None:
    """Damaged entries are misses (tests/test_cache_attacks.py); the miss writes a good one."""
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    lint_files([spec])
    (entry,) = entries(folder)
    entry.write_text("[]")
    assert codes_of(spec) == [("BS507", 4)]
    assert json.loads(entry.read_text())["diagnostics"][0]["code"] == "BS507"
    assert cache.lookup(entry.stem) is not None


def test_no_cache_switches_reading_and_writing_off(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    lint_files([spec], use_cache=False)
    monkeypatch.setenv("BESPEC_NO_CACHE", "1")
    lint_files([spec])
    assert entries(folder) == []


def test_the_folder_is_bounded(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    for i in range(5):
        spec = tmp_path / f"s{i}.yaml"
        spec.write_text(SPARE)
        lint_files([spec])
    assert len(entries(folder)) == 3


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_not_read_for_its_key(tmp_path: Path, folder: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    (found,) = lint_files([fifo]).diagnostics
    assert str(found.code) == "BS100"
    assert entries(folder) == []


def test_a_cached_run_of_the_cli_never_imports_torch(tmp_path: Path) -> None:
    env = {**os.environ, "BESPEC_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("BESPEC_NO_CACHE", None)
    spec = tmp_path / "spare.yaml"
    spec.write_text(SPARE)
    program = (
        "import sys\n"
        "from backend_spec.cli import main\n"
        f"sys.argv = ['bespec', 'lint', {str(spec)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, file=sys.stderr)\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert [run.stdout for run in runs] == [runs[0].stdout] * 2 and "BS507" in runs[0].stdout
    assert [run.stderr.splitlines()[-1] for run in runs] == ["True", "False"]
