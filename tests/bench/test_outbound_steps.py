"""bench/outbound_steps.py works: every outbound step of a cold turn is measured (never a timing
assertion)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_outbound_step_is_measured():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "outbound_steps.py"), "--messages", "40"]
        + ["--transcripts", "1", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    steps = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert steps == [
        "holds",
        "policy",
        "empty_text",
        "unique_ids",
        "pairing",
        "role_order",
        "tool_ids",
        "prepare",
        "encode",
        "keyed",
    ]
    assert all(float(line.split()[1]) >= 0 for line in done.stdout.splitlines()[1:])
