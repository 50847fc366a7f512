"""bench/books.py works: on requests the real app served (a whole and a streamed one), every step
of the bookkeeping is measured (never a timing assertion). Run as the script runs, in its own
process (it sets up the process's logging as `gateway serve` does)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("record", "pricing", "metrics", "inflight", "access-log", "session-key", "all")


def test_every_step_is_measured_for_a_whole_and_a_streamed_request():
    run = subprocess.run(
        [sys.executable, "bench/books.py", "--calls", "64", "--rounds", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert [line.split(":")[0].strip() for line in lines] == ["whole", "stream"]
    for line in lines:
        figures = dict(re.findall(r"([a-z-]+) +(\d+\.\d+)", line.split(":", 2)[2]))
        assert list(figures) == list(STEPS) and all(float(v) > 0 for v in figures.values()), line
