"""Shared test setup: the fixture package of custom fusers is importable, torch is quiet, and
ATen traces are cached in a folder of this run rather than the user's cache."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # One torch thread per xdist worker (and the bespec processes tests start): `make test`
    # runs a worker per core, and torch's default of a thread per core each made the workers
    # wait on each other's spinning threads (a fifth more CPU time for the suite).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))
if "BESPEC_CACHE_DIR" not in os.environ:
    # The run's own cache goes with the run: a fresh one per run would otherwise pile up.
    os.environ["BESPEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="bespec-test-cache-")
    atexit.register(shutil.rmtree, os.environ["BESPEC_CACHE_DIR"], ignore_errors=True)


@pytest.fixture
def specs_dir() -> Path:
    return ROOT / "specs"
