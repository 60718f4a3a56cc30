"""Shared test setup: the fixture package of custom fusers is importable, torch is quiet."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))


@pytest.fixture
def specs_dir() -> Path:
    return ROOT / "specs"
