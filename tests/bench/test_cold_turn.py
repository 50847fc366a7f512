"""bench/cold_turn.py works: every step of a cold turn is measured (never a timing assertion), on
a transcript the Chat dialect reads typed at first sight, as an agent's are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import workloads
from gateway.ingress.chat.typed import TYPED
from gateway.ingress.typed_items import typed_body

ROOT = Path(__file__).resolve().parents[2]


def test_every_step_of_a_cold_turn_is_measured():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cold_turn.py"), "--messages", "40", "--turns", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    steps = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert steps == ["bound", "parse", "decode", "keys", "size", "repair", "encode", "all"]


def test_the_sweeps_transcript_is_read_typed():
    raw = workloads.agent_body("m", workloads.agent_messages(60, "typed"), workloads.tools())
    body = typed_body(raw, "messages", TYPED, 64)
    assert body is not None
    assert len(body["messages"]) == 60 and all(type(m) in TYPED.kinds for m in body["messages"])
