"""``check -j 2`` workers never import code lying in the current directory."""

from __future__ import annotations

import os
import sys

import pytest

from backend_spec.check.parallel import BackendSource, check_cases, worker_path


def test_worker_path_leaves_out_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), *sys.path])
    path = worker_path(["bespec_custom_fusers"])
    assert "" not in path and str(tmp_path) not in path
    import backend_spec

    assert os.path.dirname(os.path.dirname(backend_spec.__file__)) in path


@pytest.mark.slow
def test_threading_py_in_the_working_directory_does_not_run(tmp_path, monkeypatch):
    marker = tmp_path / "MARKER"
    (tmp_path / "threading.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit('poisoned')\n"
    )
    spec = tmp_path / "one.yaml"
    spec.write_text(
        "name: one\ndtype_configs:\n  q: {input_dtype: quint8, output_dtype: quint8}\n"
        "patterns:\n  - pattern: nn.ReLU\n    dtype_configs: [q]\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    results = check_cases(BackendSource.of(str(spec)), "x86", 1, jobs=2)
    assert len(results) == 1
    assert not marker.exists()
