"""Shared test fixtures. Recorded provider data is read in place from ../shared/fixtures.

Outside CI a checkout without shared/ beside it skips the recorded-fixture tests (each says why);
under CI (`CI=true`) a missing fixture is a failure: CI must never turn green by skipping them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import settings

# No wall-clock limit on an example: Hypothesis's default deadline (200 ms) failed property tests
# at random in combined runs, where a full collection of a large heap on a loaded machine stalls
# one example for 150-900 ms (a FlakyFailure, "Unreliable test timings", naming whatever example
# ran then). An example's cost is not what these tests check; the bench measures time.
settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")


def fixture_path(*parts: str, root: Path = FIXTURES, env: Mapping[str, str] | None = None) -> Path:
    """Path of a recorded fixture. When it is absent the test is skipped with the reason, or
    fails under CI=true."""
    path = root.joinpath(*parts)
    if path.exists():
        return path
    if root.is_dir():
        reason = f"recorded fixture {path} is missing from {root}"
    else:
        reason = (
            f"recorded fixtures directory {root} is missing (the shared/ directory is expected"
            " beside the checkout; see the README's quick start)"
        )
    if in_ci(env):
        pytest.fail(f"CI=true and {reason}: CI runs every recorded-fixture test", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def books_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finished request is accounted for in the loop's next pass (gateway/books.py holds it up
    to `DELAY` while requests keep coming, a bench's figure): tests check what a request updated
    right after its answer. tests/exchange/test_books.py checks the held books themselves."""
    import gateway.books

    monkeypatch.setattr(gateway.books, "DELAY", 0.0)
