"""Shared test fixtures. Recorded provider data is read in place from ../shared/fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def fixture_path(*parts: str) -> Path:
    """Path of a recorded fixture; the test is skipped (with the reason) when shared/ is absent."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"recorded fixture {path} not present (shared/fixtures is expected beside the checkout)")
    return path
