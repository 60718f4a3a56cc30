"""What a user's Quantizer prints while `bespec export` imports and probes it is held back: one
note with the count and the first distinct lines (escaped), none of the lines themselves."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend_spec.cli.render.foreign import QUOTED, HeldBack, held_back

ROOT = Path(__file__).resolve().parent.parent


def test_python_c_and_logging_writes_are_all_held_and_counted(capfd):
    log = logging.getLogger("bespec-test-foreign")
    held = HeldBack()
    print("shown before", flush=True)
    with held_back(held):
        log.addHandler(logging.StreamHandler(sys.stderr))  # as a module imported here would
        print("a print")
        print("a print")
        os.write(1, b"a C-level write\n")
        log.warning("a log \x1b[31mline")
        sys.stderr.write("no newline at the end")
    print("shown after", flush=True)
    seen = capfd.readouterr()
    assert seen.out == "shown before\nshown after\n" and seen.err == ""
    assert held.lines == 5
    assert held.first == ["a print", "a C-level write", "a log \x1b[31mline"][:QUOTED]
    line = held.note("pkg.mod:make")
    assert "pkg.mod:make wrote 5 lines" in line and "\x1b" not in line


def test_blocks_add_up_and_an_empty_block_notes_nothing():
    held = HeldBack()
    with held_back(held):
        pass
    assert held.note("x") is None
    for _ in range(2):
        with held_back(held):
            print("again", flush=True)
    assert held.lines == 2 and held.first == ["again"]


def test_the_descriptors_come_back_when_the_block_raises(capfd):
    held = HeldBack()
    with pytest.raises(RuntimeError), held_back(held):
        print("inside", flush=True)
        raise RuntimeError("the quantizer failed")
    print("outside", flush=True)
    assert capfd.readouterr().out == "outside\n" and held.lines == 1


NOISY = '''
import os, sys
print("noise at import")
from torchao.quantization.pt2e.quantizer import Quantizer

class Noisy(Quantizer):
    def annotate(self, model):
        print("annotating \\x1b[2J", model.__class__.__name__)
        os.write(2, b"C noise\\n")
        return model

    def validate(self, model):
        """Nothing to check."""

def make():
    return Noisy()
'''


@pytest.mark.slow
def test_export_of_a_noisy_quantizer_shows_one_note_instead_of_its_lines(tmp_path):
    pytest.importorskip("torchao")
    source = tmp_path / "noisy.py"
    source.write_text(NOISY, encoding="utf-8")
    out = tmp_path / "spec.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "backend_spec", "export", f"{source}:make", "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    # it annotates nothing, so nothing verifies its spec: refused, and nothing is written
    assert done.returncode == 1, done.stderr[-2000:]
    assert "not verified" in done.stderr
    assert "noise at import" not in done.stdout + done.stderr.split("note:", 1)[0]
    assert "C noise" not in done.stdout
    [note] = [line for line in done.stderr.splitlines() if "of its own" in line]
    assert "first: noise at import; annotating \\x1b[2J" in note and "\x1b" not in note
    assert not out.exists()
