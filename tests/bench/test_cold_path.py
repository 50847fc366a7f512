"""bench/cold_path.py works: a few cold and warm agent turns through the gateway and through the
floor give each segment of a turn a wall and a CPU figure (never a timing assertion). Run as a
child process: it instruments aiohttp's classes for the whole process."""

from __future__ import annotations

from tests.bench.scripts import run_script

SEGMENTS = (
    "load write -> first bytes in",
    "in -> body in",
    "body in -> upstream write",
    "upstream written -> answer in",
    "answer in -> client write",
    "client written -> load has it all",
    "TOTAL (load write -> load has it)",
)


def run(*args: str) -> str:
    return run_script("cold_path.py", "--messages", "40", "--turns", "3", *args)


def test_a_cold_and_a_warm_turns_segments_are_measured_through_the_gateway():
    out = run("--warm", "--steps")
    cold, warm = out.split("cold turns (1)")[1].split("warm turns (1)")
    for segment in SEGMENTS:
        assert f"  {segment} " in cold and f"  {segment} " in warm, segment
    assert "bookkeeping (after the answer)" in cold
    for step in ("parse0->parse1", "decode0->decode1", "encode1->up", "answer0->answer1"):
        assert f"  {step} " in out, step
    assert "collector-tracked objects a request left" in out


def test_the_floors_segments_are_measured():
    out = run("--floor", "--steps")
    for segment in SEGMENTS:
        assert f"  {segment} " in out, segment
    assert "  up->up_end " in out and "  parse0->parse1 " not in out
