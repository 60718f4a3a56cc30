"""Golden diagnostics: every file in tests/bad_specs ends in SpecError at the expected places.

Each fixture starts with ``# expect: CODE LINE:COL`` lines (TOML and YAML both use ``#``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import backend_spec

CORPUS = Path(__file__).parent / "bad_specs"
FILES = sorted(CORPUS.iterdir())
_EXPECT = re.compile(rb"^# expect: (BS\d+) (\d+):(\d+)$", re.M)


def expected(path: Path) -> set[tuple[str, int, int]]:
    found = {
        (c.decode(), int(line), int(col)) for c, line, col in _EXPECT.findall(path.read_bytes())
    }
    assert found, f"{path.name} has no '# expect:' line"
    return found


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_bad_spec_reports_code_line_and_column(path: Path) -> None:
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.load(path)
    got = {(d.code, d.line, d.column) for d in info.value.diagnostics}
    assert expected(path) <= got, info.value
    assert all(d.file == str(path) for d in info.value.diagnostics)
    assert all(d.code != "BS900" for d in info.value.diagnostics), info.value


_MESSAGE = re.compile(rb"^# message: (.+)$", re.M)
WORDED = [p for p in FILES if _MESSAGE.search(p.read_bytes())]


@pytest.mark.parametrize("path", WORDED, ids=[p.name for p in WORDED])
def test_bad_spec_says_it_once_in_our_words_with_a_hint(path: Path) -> None:
    """Cases with a ``# message:`` line (the version 2 keys and fuser forms): the one
    diagnostic at the expected place carries those words and a hint, and no diagnostic leaks
    pydantic's own wording."""
    with pytest.raises(backend_spec.SpecError) as info:
        backend_spec.load(path)
    ((code, line, column),) = expected(path)
    words = _MESSAGE.search(path.read_bytes()).group(1).decode()
    here = [d for d in info.value.diagnostics if (d.line, d.column) == (line, column)]
    assert [d.code for d in here] == [code], info.value
    assert words in here[0].message and here[0].hint, info.value
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert len(errors) == 1, info.value
    assert not any(
        "Input should" in d.message or "String should" in d.message for d in info.value.diagnostics
    ), info.value


def test_cli_reports_bad_specs_without_traceback() -> None:
    """One process over the corpus: exit 1, file:line:col on stderr, never a traceback."""
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from backend_spec.cli.app import app\n"
        "runner = CliRunner()\n"
        "for path in sys.argv[1:]:\n"
        "    result = runner.invoke(app, ['compile', path])\n"
        "    out = result.output\n"
        "    assert result.exit_code == 1, (path, result.exit_code, out)\n"
        "    assert 'Traceback' not in out, out\n"
        "    assert path + ':' in out, out\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, FILES)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_hostile_specs_import_nothing_outside_allowed_roots() -> None:
    """Loading the corpus adds no module outside torch/operator (and their own deps) to
    sys.modules: names like os.system or subprocess.run are refused before any import."""
    script = (
        "import sys, backend_spec\n"
        "from backend_spec.compiler.loader import load\n"
        "load('specs/tutorial.yaml')  # warm up bespec's own lazy imports\n"
        "before = set(sys.modules)\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        load(path)\n"
        "    except backend_spec.SpecError:\n"
        "        pass\n"
        "new = sorted(m for m in set(sys.modules) - before)\n"
        "print('\\n'.join(new))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *map(str, FILES)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    new = [m for m in proc.stdout.split() if m]
    assert not [m for m in new if m.split(".")[0] in {"subprocess", "os", "my_pkg"}], new
    outside = [m for m in new if not m.startswith(("torch", "backend_spec", "encodings"))]
    assert outside == [], outside
