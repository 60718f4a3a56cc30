"""Attacks on bespec's caches (docs/security.md, Caches), each a data case of one test.

A case writes a project, runs a command once (filling the cache), attacks (edits a file the
cached result depends on, or plants and damages cache entries), runs a command again and
checks what a user would see: the exit code, the diagnostic that is due, no traceback, and no
canary file (what a pickle payload, or any unpickling at all, would create).

Commands run through the CLI in this process (a cache that only lives on disk needs no new
process: the in-process memos are cleared between runs), or in a fresh process when the
attack needs one (a module edited after it was imported), under tripwires that create the
canary if anything calls ``pickle.load``/``torch.load``/``torch.export.load``.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backend_spec.cli.app import app
from backend_spec.lint import cache as lint_cache
from backend_spec.pt2e import aten

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "quantizers"

#: Runs the CLI in a fresh process with every entry point that unpickles a file replaced by a
#: tripwire that creates the canary (argv: canary, then bespec's arguments).
_TRIPWIRED = """
import pickle, sys
from pathlib import Path

canary = Path(sys.argv[1])

def tripwire(*args, **kwargs):
    canary.write_text("unpickled")
    raise RuntimeError("tripwire: something unpickled")

pickle.load = tripwire  # from a file (torch's own code unpickles bytes in memory)
import torch
import torch.export
import torch.jit
torch.load = torch.export.load = torch.jit.load = tripwire
sys.argv = ["bespec", *sys.argv[2:]]
from backend_spec.cli import main
main()
"""


class _Payload:
    """Unpickling this runs ``open(canary, "w")``: what a planted cache file would do."""

    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self):
        return (open, (str(self.canary), "w"))


def payload(canary: Path) -> bytes:
    return pickle.dumps(_Payload(canary))


# --- the projects ------------------------------------------------------------------------

BASE = """\
name: base
dtype_configs:
  act: {input_dtype: quint8, output_dtype: quint8}
patterns:
  - pattern: nn.ReLU
    dtype_configs: [act]
"""
BROKEN_BASE = BASE.replace("dtype_configs: [act]", "dtype_configs: [missing]")
BASE_TOML = """\
name = "base"

[dtype_configs.act]
input_dtype = "quint8"
output_dtype = "quint8"

[[patterns]]
pattern = "nn.ReLU"
dtype_configs = ["act"]
"""
BROKEN_BASE_TOML = BASE_TOML.replace('["act"]', '["missing"]')

#: Six spellings of ``extends`` the loader accepts and a regex on the raw text missed.
EXTENDS_SPELLINGS = {
    "root-flow-mapping": ("child.yaml", "{extends: base.yaml, name: child}\n"),
    "complex-key": ("child.yaml", "? extends\n: base.yaml\nname: child\n"),
    "indented-root-mapping": ("child.yaml", "  extends: base.yaml\n  name: child\n"),
    "escaped-yaml-key": ("child.yaml", '"ext\\x65nds": base.yaml\nname: child\n'),
    "indented-toml-key": ("child.toml", 'name = "child"\n  extends = "base.toml"\n'),
    "escaped-toml-key": ("child.toml", '"ext\\u0065nds" = "base.toml"\nname = "child"\n'),
}

#: A file with one error (BS401 at line 4): a forged clean entry would turn exit 1 into 0.
BAD = """\
name: bad
patterns:
  - pattern: nn.ReLU
    dtype_configs: [missing]
"""

GELU = """\
name: gelu
dtype_configs:
  act: {input_dtype: quint8, output_dtype: quint8}
patterns:
  - pattern: nn.GELU
    observation_type: output_use_different_observer_as_input
    dtype_configs: [act]
"""
OWN = GELU.replace("nn.GELU", "own_act.Act")
OWN_MODULE = """\
import torch


class Act(torch.nn.Module):
    def forward(self, x):
        return torch.{fn}(x)
"""


# --- what an attack does -------------------------------------------------------------------

Action = Callable[[Path, Path, Path], None]  # (project folder, cache folder, canary)


def write(name: str, text: str) -> Action:
    def act(work: Path, cache: Path, canary: Path) -> None:
        (work / name).write_text(text, encoding="utf-8")

    return act


def relink(name: str, target: str) -> Action:
    def act(work: Path, cache: Path, canary: Path) -> None:
        (work / name).unlink()
        (work / name).symlink_to(target)

    return act


def lint_entries(cache: Path) -> list[Path]:
    found = sorted((cache / "lint").glob("*.json"))
    assert found, "the first run cached nothing: the attack would prove nothing"
    return found


def each_lint_entry(make: Callable[[Path, Path], bytes | None]) -> Action:
    """Replace every lint entry by ``make(entry, canary)`` (None: ``make`` replaced it)."""

    def act(work: Path, cache: Path, canary: Path) -> None:
        for entry in lint_entries(cache):
            data = make(entry, canary)
            if data is not None:
                entry.write_bytes(data)

    return act


def text(data: str) -> Callable[[Path, Path], bytes]:
    return lambda entry, canary: data.encode()


def resealed(edit: Callable[[dict], None]) -> Callable[[Path, Path], bytes]:
    """The entry edited, then sealed again: a forger who knows the algorithm. Validation,
    not the seal, must refuse it."""

    def make(entry: Path, canary: Path) -> bytes:
        body = json.loads(entry.read_text())
        del body["seal"]
        edit(body)
        return json.dumps({**body, "seal": lint_cache._seal(body)}).encode()

    return make


def unsealed_clean(entry: Path, canary: Path) -> bytes:
    body = json.loads(entry.read_text())
    return json.dumps({**body, "diagnostics": []}).encode()


def first_line(value: object) -> Callable[[dict], None]:
    def edit(body: dict) -> None:
        body["diagnostics"][0]["line"] = value

    return edit


def set_field(name: str, value: object) -> Callable[[dict], None]:
    def edit(body: dict) -> None:
        body["diagnostics"][0][name] = value

    return edit


def replaced_by(kind: str) -> Callable[[Path, Path], None]:
    def make(entry: Path, canary: Path) -> None:
        entry.unlink()
        if kind == "directory":
            entry.mkdir()
        elif kind == "fifo":
            os.mkfifo(entry)
        else:
            entry.symlink_to(kind)

    return make


def trace_file(make: Callable[[Path], bytes]) -> Action:
    """Replace the trace cache file by ``make(canary)``."""

    def act(work: Path, cache: Path, canary: Path) -> None:
        (path,) = cache.glob("aten-traces-*.json")
        path.write_bytes(make(canary))

    return act


def trace_entry(entry: object) -> Callable[[Path], bytes]:
    return lambda canary: json.dumps({"ops": {"nn.GELU": entry}}).encode()


def trace_file_becomes_directory(work: Path, cache: Path, canary: Path) -> None:
    (path,) = cache.glob("aten-traces-*.json")
    path.unlink()
    path.mkdir()


def plant_pickles(work: Path, cache: Path, canary: Path) -> None:
    """A pickle payload under every name a cache of bespec uses or used (the probe suite of
    ``export``: ``quantizer-probes/suite-KEY.pt2``, read by ``torch.export.load``)."""
    probes = cache / "quantizer-probes"
    probes.mkdir(mode=0o700, exist_ok=True)
    for name in ("suite-0123456789abcdef01234567.pt2", "suite.pt2"):
        (probes / name).write_bytes(payload(canary))
    for name in ("suite-0123456789abcdef01234567.json",):
        (probes / name).write_text('{"branches": [], "unit_names": {}}')


def chmod(mode: int, sub: str = "") -> Action:
    def act(work: Path, cache: Path, canary: Path) -> None:
        (cache / sub).chmod(mode)

    return act


def chown_to_another_user(work: Path, cache: Path, canary: Path) -> None:
    os.chown(cache, 4242, 4242)


def both(*actions: Action) -> Action:
    def act(work: Path, cache: Path, canary: Path) -> None:
        for action in actions:
            action(work, cache, canary)

    return act


# --- the cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    files: dict[str, str]
    #: The command run before the attack (it fills the cache), and its exit code.
    warm: tuple[str, ...]
    warm_exit: int
    attack: Action
    #: The command run after it, its exit code and what its output must contain.
    run: tuple[str, ...]
    exit: int
    says: tuple[str, ...] = ()
    #: A file the second run writes and what it must contain (a trace redone).
    wrote: tuple[str, str] | None = None
    #: Run both commands in fresh processes (the attack edits imported code).
    fresh: bool = False
    #: Where each command runs, inside the case's folder.
    warm_in: str = "."
    run_in: str = "."
    #: How many times each text of ``says`` appears at least (notes: exactly once).
    once: tuple[str, ...] = field(default=())


def lint(*files: str) -> tuple[str, ...]:
    return ("lint", *files)


def _spelling_cases() -> dict[str, Attack]:
    cases = {}
    for name, (child, spelling) in EXTENDS_SPELLINGS.items():
        toml = child.endswith(".toml")
        base = "base.toml" if toml else "base.yaml"
        cases[f"extends-{name}-base-edited"] = Attack(
            files={child: spelling, base: BASE_TOML if toml else BASE},
            warm=lint(child),
            warm_exit=0,
            attack=write(base, BROKEN_BASE_TOML if toml else BROKEN_BASE),
            run=lint(child),
            exit=1,
            says=("BS402",),
        )
    return cases


_LINT_DAMAGE = {
    "empty-list": text("[]"),
    "empty-object": text("{}"),
    "unsealed-clean": unsealed_clean,
    "line-infinity": lambda entry, canary: entry.read_bytes().replace(
        b'"line": 4', b'"line": Infinity'
    ),
    "line-nan": lambda entry, canary: entry.read_bytes().replace(b'"line": 4', b'"line": NaN'),
    "line-1e400-resealed": resealed(first_line(1e400)),
    "line-string-resealed": resealed(first_line("4")),
    "line-bool-resealed": resealed(first_line(True)),
    "unknown-code-resealed": resealed(set_field("code", "BS999")),
    "unknown-severity-resealed": resealed(set_field("severity", "fatal")),
    "extra-field-resealed": resealed(set_field("exec", "import os")),
    "other-key-resealed": resealed(lambda body: body.update(key="0" * 64)),
    "nested-100000": text("[" * 100_000 + "]" * 100_000),
    "nested-in-envelope": lambda entry, canary: entry.read_bytes().replace(
        b'"reads": []', b'"reads": ' + b"[" * 100_000 + b"]" * 100_000
    ),
    "oversized": text(" " * (lint_cache.MAX_ENTRY_BYTES + 1) + "[]"),
    "not-utf8": lambda entry, canary: b"\xff\xfe[]",
    "pickle-payload": lambda entry, canary: payload(canary),
    "directory": replaced_by("directory"),
    "fifo": replaced_by("fifo"),
    "symlink-to-dev-zero": replaced_by("/dev/zero"),
}

_TRACE_DAMAGE = {
    "nested-100000": lambda canary: b'{"ops": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "nan-in-chain": lambda canary: b'{"ops": {"nn.GELU": {"chain": [[NaN]], "where": [null]}}}',
    "not-an-aten-name": trace_entry({"chain": [["os.system"]], "where": [None]}),
    "chain-of-numbers": trace_entry({"chain": [[1]], "where": [None]}),
    "where-of-other-length": trace_entry({"chain": [["aten.gelu.default"]], "where": []}),
    "extra-key": trace_entry({"chain": [["aten.gelu.default"]], "where": [None], "x": 1}),
    "ops-is-a-list": lambda canary: b'{"ops": []}',
    "pickle-payload": payload,
}

GELU_TRACED = ("q.py", "'chain': [['aten.gelu.default'")
COMPILE_GELU = ("compile", "gelu.yaml", "--target", "pt2e", "-o", "q.py")
COMPILE_OWN = (
    "compile",
    "own.yaml",
    "--target",
    "pt2e",
    "-o",
    "q.py",
    "--allow-import",
    "own_act",
)
REFUSED = "not used:"

CASES: dict[str, Attack] = {
    **_spelling_cases(),
    "extends-grandparent-edited": Attack(
        files={
            "child.yaml": "extends: mid.yaml\nname: child\n",
            "mid.yaml": "extends: base.yaml\nname: mid\n",
            "base.yaml": BASE,
        },
        warm=lint("child.yaml"),
        warm_exit=0,
        attack=write("base.yaml", BROKEN_BASE),
        run=lint("child.yaml"),
        exit=1,
        says=("BS402",),
    ),
    "extends-base-created": Attack(
        files={"child.yaml": "extends: base.yaml\nname: child\n"},
        warm=lint("child.yaml"),
        warm_exit=1,
        attack=write("base.yaml", BASE),
        run=lint("child.yaml"),
        exit=0,
    ),
    "extends-symlink-repointed": Attack(
        files={
            "child.yaml": "extends: base.yaml\nname: child\n",
            "good.yaml": BASE,
            "bad_base.yaml": BROKEN_BASE,
            "base.yaml": BASE,
        },
        warm=lint("child.yaml"),
        warm_exit=0,
        attack=relink("base.yaml", "bad_base.yaml"),
        run=lint("child.yaml"),
        exit=1,
        says=("BS402",),
    ),
    **{
        f"lint-entry-{name}": Attack(
            files={"bad.yaml": BAD},
            warm=lint("bad.yaml"),
            warm_exit=1,
            attack=each_lint_entry(make),
            run=lint("bad.yaml"),
            exit=1,
            says=("bad.yaml:4:21: error BS401",),
        )
        for name, make in _LINT_DAMAGE.items()
    },
    **{
        f"trace-file-{name}": Attack(
            files={"gelu.yaml": GELU},
            warm=COMPILE_GELU,
            warm_exit=0,
            attack=trace_file(make),
            run=COMPILE_GELU,
            exit=0,
            wrote=GELU_TRACED,
        )
        for name, make in _TRACE_DAMAGE.items()
    },
    "trace-file-directory": Attack(
        files={"gelu.yaml": GELU},
        warm=COMPILE_GELU,
        warm_exit=0,
        attack=trace_file_becomes_directory,
        run=COMPILE_GELU,
        exit=0,
        wrote=GELU_TRACED,
    ),
    "folder-writable-by-others-with-a-forged-clean-entry": Attack(
        files={"bad.yaml": BAD, "bad2.yaml": BAD},
        warm=lint("bad.yaml", "bad2.yaml"),
        warm_exit=1,
        attack=both(each_lint_entry(resealed(lambda b: b.update(diagnostics=[]))), chmod(0o777)),
        run=lint("bad.yaml", "bad2.yaml"),
        exit=1,
        says=("bad.yaml:4:21: error BS401", "bad2.yaml:4:21: error BS401"),
        once=(REFUSED,),
    ),
    "lint-subfolder-writable-by-its-group": Attack(
        files={"bad.yaml": BAD},
        warm=lint("bad.yaml"),
        warm_exit=1,
        attack=both(
            each_lint_entry(resealed(lambda b: b.update(diagnostics=[]))), chmod(0o770, "lint")
        ),
        run=lint("bad.yaml"),
        exit=1,
        says=("BS401",),
        once=(REFUSED,),
    ),
    "trace-folder-writable-by-others": Attack(
        files={"gelu.yaml": GELU},
        warm=COMPILE_GELU,
        warm_exit=0,
        attack=both(
            trace_file(trace_entry({"chain": [["aten.relu.default"]], "where": [None]})),
            chmod(0o777),
        ),
        run=COMPILE_GELU,
        exit=0,
        wrote=GELU_TRACED,
        once=(REFUSED,),
    ),
}

if hasattr(os, "geteuid") and os.geteuid() == 0:  # only root can give a folder away
    CASES["folder-of-another-user"] = Attack(
        files={"bad.yaml": BAD},
        warm=lint("bad.yaml"),
        warm_exit=1,
        attack=both(
            each_lint_entry(resealed(lambda b: b.update(diagnostics=[]))), chown_to_another_user
        ),
        run=lint("bad.yaml"),
        exit=1,
        says=("BS401",),
        once=(REFUSED,),
    )

#: Cases that run fresh processes tracing or exporting (over ten seconds each): the module
#: edits, and the attack of issue 27, a pickle planted where ``export`` read its probe suite
#: with ``torch.export.load`` (a whole export: minutes on two busy cores).
SLOW = {
    "trace-allowed-module-edited": Attack(
        files={"own.yaml": OWN, "own_act.py": OWN_MODULE.format(fn="relu")},
        warm=COMPILE_OWN,
        warm_exit=0,
        attack=write("own_act.py", OWN_MODULE.format(fn="sigmoid")),
        run=COMPILE_OWN,
        exit=0,
        wrote=("q.py", "'chain': [['aten.sigmoid.default'"),
        fresh=True,
    ),
    "trace-same-named-module-of-another-project": Attack(
        files={
            "a/own.yaml": OWN,
            "a/own_act.py": OWN_MODULE.format(fn="relu"),
            "b/own.yaml": OWN,
            "b/own_act.py": OWN_MODULE.format(fn="sigmoid"),
        },
        warm=COMPILE_OWN,
        warm_exit=0,
        attack=lambda work, cache, canary: None,
        run=COMPILE_OWN,
        exit=0,
        wrote=("q.py", "'chain': [['aten.sigmoid.default'"),
        fresh=True,
        warm_in="a",
        run_in="b",
    ),
    "export-planted-probe-suite": Attack(
        files={},
        warm=("--version",),
        warm_exit=0,
        attack=plant_pickles,
        run=("export", f"{FIXTURES / 'odd.py'}:odd_quantizer", "-o", "spec.yaml"),
        exit=0,
        wrote=("spec.yaml", "spec_version"),
        fresh=True,
    ),
}


def _params():
    for name, case in CASES.items():
        yield pytest.param(case, id=name)
    for name, case in SLOW.items():
        yield pytest.param(case, id=name, marks=pytest.mark.slow)


# --- the test --------------------------------------------------------------------------------


def _forget_traces() -> None:
    """What a new process would not know: the trace memos of this one."""
    for memo in (aten._disk_cache, aten._traced, aten.code_digest):
        memo.cache_clear()


def _run(case: Attack, args: tuple[str, ...], where: Path, cache: Path, canary: Path):
    """(exit code, output) of one bespec command in ``where``."""
    if case.fresh:
        env = {
            **os.environ,
            "BESPEC_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(where)]),
        }
        env.pop("BESPEC_NO_CACHE", None)
        done = subprocess.run(
            [sys.executable, "-c", _TRIPWIRED, str(canary), *args],
            capture_output=True,
            text=True,
            cwd=where,
            env=env,
            timeout=1800,
        )
        return done.returncode, done.stdout + done.stderr
    _forget_traces()
    sys.path.insert(0, str(where))
    cwd = os.getcwd()
    os.chdir(where)
    try:
        result = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(cwd)
        sys.path.remove(str(where))
        _forget_traces()
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    return result.exit_code, result.output + ("Traceback (in process)" if crashed else "")


@pytest.mark.parametrize("case", _params())
def test_cache_attack(case: Attack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work, cache, canary = tmp_path / "project", tmp_path / "cache", tmp_path / "canary"
    work.mkdir()
    cache.mkdir(mode=0o700)
    for name, content in case.files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(content, encoding="utf-8")
    monkeypatch.setenv("BESPEC_CACHE_DIR", str(cache))
    monkeypatch.delenv("BESPEC_NO_CACHE", raising=False)
    code, output = _run(case, case.warm, work / case.warm_in, cache, canary)
    assert code == case.warm_exit, output
    case.attack(work, cache, canary)
    code, output = _run(case, case.run, work / case.run_in, cache, canary)
    assert "Traceback" not in output, output
    assert not canary.exists(), "something unpickled a planted cache file"
    assert code == case.exit, output
    for said in case.says:
        assert said in output, output
    for said in case.once:
        assert output.count(said) == 1, output
    if case.wrote is not None:
        name, content = case.wrote
        assert content in (work / case.run_in / name).read_text(encoding="utf-8")


# --- no code path can unpickle ---------------------------------------------------------------

#: Calls that unpickle (or load code) whatever the bytes say.
_UNPICKLING = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("marshal", "load"),
    ("marshal", "loads"),
    ("torch", "load"),
    ("export", "load"),
    ("jit", "load"),
    ("dill", "load"),
    ("joblib", "load"),
    ("shelve", "open"),
}


def test_no_module_of_the_package_can_unpickle() -> None:
    """The caches store JSON they validate; nothing in bespec calls a pickle-capable loader
    (``torch.export.load`` falls back to unrestricted unpickling)."""
    found = []
    for path in sorted((ROOT / "backend_spec").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(
                node.value, (ast.Name, ast.Attribute)
            ):
                owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
                if (owner, node.attr) in _UNPICKLING:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {owner}.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module in ("pickle", "marshal", "dill"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module} import")
    assert found == []


def test_the_tripwire_catches_an_unpickling(tmp_path: Path) -> None:
    """The fresh-process cases would see an unpickling: the tripwire creates the canary."""
    canary = tmp_path / "canary"
    blob = tmp_path / "blob.pt"
    blob.write_bytes(payload(tmp_path / "never"))
    script = _TRIPWIRED.replace(
        "from backend_spec.cli import main\nmain()", f"torch.load({str(blob)!r})"
    )
    done = subprocess.run([sys.executable, "-c", script, str(canary)], capture_output=True)
    assert done.returncode != 0 and canary.exists() and not (tmp_path / "never").exists()
    shutil.rmtree(tmp_path / "never", ignore_errors=True)
