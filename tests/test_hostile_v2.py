"""The version 2 red-team corpus (tests/hostile/v2_*.yaml) through the CLI surfaces a spec
reaches: the generated FX module (``compile -o``), the generated pt2e module (``compile
--target pt2e -o``) and ``lint --format github``. test_hostile.py holds each file to its
``# expect:`` diagnostic within the load caps; this test holds the outputs: exit 0 or 1, no
traceback, no marker file, no control character or injected workflow command in the output,
and a generated module that runs without executing spec text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).parent / "hostile"
FILES = sorted(CORPUS.glob("v2_*.yaml"))

_SCRIPT = r"""
import ast, json, os, re, sys
from pathlib import Path
from typer.testing import CliRunner
from backend_spec.cli.app import app

runner = CliRunner()
control = re.compile(r"[\x00-\x09\x0b-\x1f\x7f\x9b]")
report = []
for path in sys.argv[1:]:
    for args in (
        ["compile", path, "-o", "out.py"],
        ["compile", path, "--target", "pt2e", "-o", "q.py"],
        ["lint", path, "--format", "github"],
    ):
        result = runner.invoke(app, args)
        out = result.output
        problems = []
        if result.exit_code not in (0, 1):
            problems.append(f"exit {result.exit_code}")
        crashed = result.exception and not isinstance(result.exception, SystemExit)
        if "Traceback" in out or crashed:
            problems.append("traceback")
        if control.search(out):
            problems.append("control character in output")
        if args[-1] == "github":
            lines = [line for line in result.stdout.splitlines() if line]
            forged = [l for l in lines if not l.startswith(("::error file=" + path,
                      "::warning file=" + path, "::notice file=" + path))]
            if forged:
                problems.append(f"line not ours: {forged[0][:80]!r}")
        for generated in ("out.py", "q.py"):
            if os.path.exists(generated):
                names = {n.id for n in ast.walk(ast.parse(Path(generated).read_text()))
                         if isinstance(n, ast.Name)}
                if {"__import__", "exec", "eval", "system"} & names:
                    problems.append(f"{generated} calls spec text")
        if os.path.exists("MARKER"):
            problems.append("marker written")
        report.append([path, args[0] + " " + args[-1], problems])
    if os.path.exists("out.py"):  # a generated FX module runs without running spec text
        run = __import__("subprocess").run([sys.executable, "out.py"], capture_output=True)
        if run.returncode != 0 or os.path.exists("MARKER"):
            report.append([path, "run out.py", [run.stderr.decode()[-300:] or "marker"]])
        os.remove("out.py")
    if os.path.exists("q.py"):
        os.remove("q.py")
print(json.dumps(report))
"""


def test_v2_corpus_through_generated_modules_and_github_output(tmp_path: Path) -> None:
    assert len(FILES) >= 15
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *map(str, FILES)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [row for row in report if row[2]]
    assert bad == [], bad
    assert not (tmp_path / "MARKER").exists()
