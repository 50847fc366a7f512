"""bench/chained_turn.py works: the turns it measures go on from the held ones (the memo found
their items, all but the new ones), never a timing assertion."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_measured_turns_go_on_from_the_held_ones():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "chained_turn.py"), "--messages", "100", "--sessions", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    turns, found, total = map(int, re.search(r"n=(\d+)\); items found (\d+) of (\d+)", done.stdout).groups())
    # each measured turn sends what the turn before sent and two messages more: only those are new
    assert turns == 2 and found > 0 and total - found == 2 * turns
