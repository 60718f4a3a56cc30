"""The allow-list verdict the FX-versus-pt2e matrices (PTQ and QAT) share."""

from __future__ import annotations

from typing import Any


def assert_allowed(case: str, result: Any, listed: str | None) -> None:
    """``case`` (``spec/model``) is identical in both flows, or its allow-list entry
    ``listed`` names a difference class the comparison ``result`` itself detects. A listed
    case that has become identical fails too, so the allow-list cannot go stale."""
    if result.identical:
        assert listed is None, f"{case} is identical now: drop it from the allow-list"
        return
    assert listed is not None, (
        f"{case} differs (max {result.max_diff:.3g}, quantize ops "
        f"{result.fx.quantize_ops} vs {result.pt2e.quantize_ops}, detected {result.classes})"
    )
    assert listed in result.classes, f"listed as {listed}, detected {result.classes}"
