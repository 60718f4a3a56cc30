"""Text from a spec never becomes code: hostile names and paths, fuzzed, go into the module
``compile -o`` writes and the test ``--emit-test`` writes; importing them runs nothing."""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from backend_spec._torch import BackendConfig, BackendPatternConfig, torch
from backend_spec.check.emit_pytest import emit_pytest
from backend_spec.cli.app import app
from backend_spec.export.python import generate_module

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

#: Pieces that close a string or docstring, escape, or format: the hostile alphabet.
PIECES = ['"""', "'''", '"', "'", "\\", "\n", "{", "}", "{name}", "%s", "#", "\x00", "\u2028"]
MARKER = Path(tempfile.mkdtemp()) / "MARKER"  # absolute: no test changes directory
PAYLOAD = f'__import__("pathlib").Path({str(MARKER)!r}).touch()'
hostile_text = st.lists(
    st.one_of(st.sampled_from(PIECES), st.just(PAYLOAD), st.text(max_size=5)), max_size=8
).map("".join)


def import_module(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"generated_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_a_literal(source: str, user: str) -> None:
    """The user text is carried whole (as its repr, in docstrings) by a string literal."""
    strings = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant)]
    assert any(user in s or repr(user) in s for s in strings if isinstance(s, str))


@SETTINGS
@given(name=hostile_text.filter(bool), source=hostile_text)
def test_compiled_module_runs_no_injected_code(tmp_path_factory, name: str, source: str) -> None:
    folder = tmp_path_factory.mktemp("gen")
    backend = BackendConfig(name).set_backend_pattern_config(BackendPatternConfig(torch.nn.ReLU))
    text = generate_module(backend, source=source)
    in_a_literal(text, name)
    in_a_literal(text, source)
    out = folder / "generated.py"
    out.write_text(text, encoding="utf-8")
    module = import_module(out)
    assert module.get_backend_config().name == backend.name
    assert not MARKER.exists()


@SETTINGS
@given(
    name=st.lists(st.sampled_from(["x", "'''", '"""', "\\", "{", "}", "$(touch M)"]), max_size=6)
)
def test_emitted_test_runs_no_injected_code(tmp_path_factory, name: list[str]) -> None:
    folder = tmp_path_factory.mktemp("emit")
    stem = "".join(name).replace("/", "_") or "s"
    spec = folder / f"{stem}.yaml"
    spec.write_text("name: x\npatterns:\n  - pattern: nn.ReLU\n")
    golden = folder / f"{stem}.golden.json"
    out = folder / "test_emitted.py"
    emit_pytest(spec, golden, out, allow_imports=[])
    namespace = import_module(out)
    assert Path(namespace.SPEC).name == spec.name  # type: ignore[attr-defined]
    assert not MARKER.exists() and not (folder / "M").exists()


def test_compile_o_with_a_docstring_closing_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / 'we"""ird.yaml'
    spec.write_text(
        'name: \'x""" if __import__("os").system("touch MARKER") else """\'\n'
        "patterns:\n  - pattern: nn.ReLU\n"
    )
    out = tmp_path / "backend.py"
    result = CliRunner().invoke(app, ["compile", str(spec), "-o", str(out)])
    assert result.exit_code == 0, result.output
    sys.path.insert(0, str(tmp_path))
    try:
        module = import_module(out)
    finally:
        sys.path.remove(str(tmp_path))
    assert "touch MARKER" in module.get_backend_config().name
    assert not (tmp_path / "MARKER").exists()
