"""bench/c1_path.py works: every step it wraps still exists, and a few requests through the gateway
and through the floor give each segment a figure (never a timing assertion). Run as a child
process: it instruments aiohttp's classes for the whole process."""

from __future__ import annotations

from tests.bench.scripts import run_script


def run(*args: str) -> str:
    return run_script("c1_path.py", "--rounds", "1", "--requests", "40", "--warm", "10", *args)


def test_the_gateways_steps_are_each_measured():
    out = run()
    for segment in ("request in -> upstream out", "answer in -> client out", "tail (next request in)"):
        assert segment in out
    for step in ("decode0->decode1", "repair0->repair1", "encode1->up", "answer0->answer1", "app1->out"):
        assert f"  {step} " in out, step
    assert "bookkeeping ran inside the next one's" in out


def test_the_floors_segments_are_measured():
    out = run("--floor")
    assert "request in -> upstream out" in out and "answer in -> client out" in out
    assert "  app0->up " in out
