"""bench/turns.py works in every client dialect it names (bench/dialects.py): the sweep's agent
transcript, as Codex and Gemini CLI send it, goes through the gateway turn after turn (never a
timing assertion)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("dialect", ["chat", "responses", "gemini"])
def test_every_kind_of_turn_is_measured(dialect):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "turns.py"), "--messages", "40", "--sessions", "1"]
        + ["--dialect", dialect],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    kinds = [line.split()[2] for line in done.stdout.splitlines()]
    assert kinds == ["cold", "warm", "after"] and f"({dialect})" in done.stdout
