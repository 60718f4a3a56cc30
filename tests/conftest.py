"""Shared test setup: the fixture package of custom fusers is importable, torch is quiet, and
ATen traces are cached in a folder of this run rather than the user's cache."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))
os.environ.setdefault("BESPEC_CACHE_DIR", tempfile.mkdtemp(prefix="bespec-test-cache-"))


@pytest.fixture
def specs_dir() -> Path:
    return ROOT / "specs"
