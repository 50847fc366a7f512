"""bench/warm_turn.py works: it prints each step of the warm and after turns (never a timing
assertion)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_each_step_of_both_turns():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "warm_turn.py"), "--messages", "100", "--sessions", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for kind in ("warm", "after"):
        assert f"100 messages {kind}, ms per turn (median of 1; min):" in done.stdout
    steps = re.findall(r"^  (\w+) ", done.stdout, re.MULTILINE)
    assert steps == 2 * ["bound", "parse", "decode", "size", "keys", "repair", "encode", "all"]
