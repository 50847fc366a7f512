"""bench/ works: a tiny run of the whole suite (stub, gateway and load generator in their own
processes) produces every figure, with no failed request, as JSON that parses, and a table. Never
a timing assertion: only that each figure was measured. Plus: the bench's agent transcripts are
requests the gateway accepts and forwards in a form the strict OpenAI simulator accepts, so what
the bench times is real work."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson

from bench import rig, workloads
from bench.figures import Settings
from bench.run import FIGURES
from gateway.simulators.base import Reply, ToolCallSpec, free_port
from tests.ops.conftest import running_stack

ROOT = Path(__file__).resolve().parents[2]


def _numbers(value: object) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    return []


def run_bench(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--json", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return orjson.loads(out.read_bytes()), run.stdout


def test_quick_run_produces_every_figure(tmp_path):
    results, table = run_bench(tmp_path, "--soak", "400")
    figures = results["figures"]
    assert list(figures) == list(FIGURES)
    paths = {"direct": 0, "floor": 0, "gateway": 0}
    quick = Settings.quick()
    assert set(figures["sweep"]["sizes"]) == {str(n) for n in quick.sweep}
    for name, figure in figures.items():
        numbers = _numbers(figure)
        assert numbers and all(math.isfinite(n) for n in numbers), name
    for name in ("c1_latency", "c32_instant", "c64_slow", "streams", "many_streams"):
        assert figures[name]["errors"] == paths, name
        assert figures[name]["cpu"]["gateway"]["gateway"] > 0, name  # the gateway did the work
        assert figures[name]["gateway_cpu_us_per_unit"]["gateway"] > 0, name
        # the relay's CPU over a quick round can be under one clock tick: measured, maybe 0
        assert figures[name]["gateway_cpu_us_per_unit"]["floor"] >= 0, name
        assert set(figures[name]["above_floor_cpu_us_per_unit"]) == {"gateway"}, name
    assert set(figures["c1_latency"]["above_floor_ms"]["gateway"]) == {"p50", "p99"}
    assert set(figures["c32_instant"]["of_floor"]) == set(figures["c64_slow"]["of_floor"]) == {"gateway"}
    assert set(figures["streams"]["above_floor_first_chunk_ms"]) == {"gateway"}
    for entry in figures["sweep"]["sizes"].values():
        assert entry["errors"] == paths
        assert set(entry["cold"]["p50_ms"]) == set(entry["warm"]["p50_ms"]) == set(paths)
        assert set(entry["warm"]["above_floor_p50_ms"]) == {"gateway"}
        for kind in ("cold", "warm"):  # the gateway's CPU per turn of each kind (ns-exact)
            cpu = entry[kind]["gateway_cpu_us_per_request"]
            assert set(cpu) == {"floor", "gateway"} and cpu["gateway"] > 0 and cpu["floor"] > 0, kind
            assert set(entry[kind]["above_floor_cpu_us_per_request"]) == {"gateway"}, kind
    memory = figures["memory"]["gateway"]
    assert memory["errors"] == 0 and memory["idle_mib"] > 0 and memory["soak_requests"] == 400
    assert figures["c1_latency"]["requests"] == {name: 2 * quick.c1_requests for name in paths}
    assert figures["streams"]["streams"] == quick.streams
    # every path's pool is filled before its timed burst: the relays connect to the stub in the
    # fill, never in the timed burst (direct: the load generator's own connections, every round)
    connects = figures["streams"]["upstream_connects"]
    assert connects == {"direct": [quick.streams], "floor": [0], "gateway": [0]}
    assert "connects fill+timed" in table
    meta = results["meta"]
    assert meta["warm_up_errors"] == paths and meta["quick"] is True
    floor, variant = meta["variants"]
    assert floor["name"] == "floor" and floor["relay"] is True and floor["processes"] == 1
    assert variant["name"] == "gateway" and variant["processes"] == 1 and variant["store"] == "memory"
    assert not variant["relay"]
    for label in ("c=1 latency", "c=32 instant upstream", "20 ms upstream", "first chunk", "worst stall"):
        assert label in table
    assert "transcript 100 msgs, warm" in table and "soak" in table
    assert "above floor" in table and "c1_latency [floor]" in table
    assert "gateway CPU per turn: cold" in table
    assert "FAILED REQUESTS" not in table


def test_variants_are_measured_side_by_side(tmp_path):
    """Two gateways interleaved in one run (here one process and two worker processes)."""
    results, table = run_bench(
        tmp_path,
        "--soak",
        "300",
        "--only",
        "c1_latency",
        "memory",
        "--no-floor",
        "--variant",
        "one",
        "--variant",
        "two:workers=2",
    )
    one, two = results["meta"]["variants"]
    assert (one["name"], one["processes"], one["store"]) == ("one", 1, "memory")
    assert (two["name"], two["processes"], two["store"]) == ("two", 3, "sqlite")  # a supervisor, 2 workers
    assert two["pinning"] == "not pinned"
    c1 = results["figures"]["c1_latency"]
    assert set(c1["added_ms"]) == {"one", "two"} and c1["errors"] == {"direct": 0, "one": 0, "two": 0}
    assert set(results["figures"]["memory"]) == {"one", "two"}
    assert "c1_latency [two]" in table
    assert "above floor" not in table and c1["above_floor_ms"] == {}


def test_workloads_have_the_shape_they_claim():
    messages = workloads.agent_messages(45, "seed-1")
    assert len(messages) == 45 and messages[-1]["role"] in ("tool", "user")
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    results = [m for m in messages if m["role"] == "tool"]
    assert [c["id"] for c in calls][: len(results)] == [m["tool_call_id"] for m in results]
    assert all(len(m["content"]) == workloads.RESULT_BYTES for m in results)
    assert any(m.get("reasoning_content") for m in messages)
    assert len(workloads.tools()) == workloads.TOOL_COUNT == 20
    assert workloads.agent_messages(45, "seed-2") != messages  # every seed is a session of its own


async def test_agent_transcripts_pass_through_the_gateway_to_the_strict_simulator():
    """Turn N and turn N+1 of the sweep, as the bench builds them, through the gateway."""
    async with running_stack() as stack:
        state = stack.hub.states["openai_chat"]
        state.push(Reply(tool_calls=[ToolCallSpec("tool_00", {"path": "src/main.py"})]))  # like the stub
        messages = workloads.agent_messages(45, "smoke")
        tool_defs = workloads.tools()
        status, _, body = await stack.chat(
            orjson.loads(workloads.agent_body("openai-chat", messages, tool_defs))
        )
        assert status == 200, body
        answer = orjson.loads(body)["choices"][0]["message"]
        turn = workloads.next_turn(messages, answer, "smoke")
        status, _, body = await stack.chat(orjson.loads(workloads.agent_body("openai-chat", turn, tool_defs)))
        assert status == 200, body
        assert state.rejections == [] and len(state.requests) == 2
        forwarded = state.requests[1].body["messages"]
        assert sum(m["role"] == "tool" for m in forwarded) == sum(m["role"] == "tool" for m in turn)


def _start(name: str, args: list[str], tmp_path: Path, marker: str) -> rig.Child:
    child = rig.Child(
        name, rig.python(*args), {**os.environ, "RELAY_KEY": "k"}, None, tmp_path / f"{name}.log"
    )
    child.wait_ready(marker)
    return child


async def test_the_floor_relays_bytes_both_ways_untouched(tmp_path):
    """bench/relay.py (the floor): the stub's answer arrives byte for byte, whole and streamed."""
    stub_port, relay_port = free_port(), free_port()
    stub = _start("stub", ["bench/stub.py", "--port", str(stub_port)], tmp_path, "stub listening")
    try:
        relay = _start(
            "relay",
            [
                "bench/relay.py",
                "--port",
                str(relay_port),
                "--upstream",
                f"http://127.0.0.1:{stub_port}",
                "--key-env",
                "RELAY_KEY",
            ],
            tmp_path,
            "gateway listening",
        )
        try:
            async with aiohttp.ClientSession() as http:
                for body in (workloads.small_body("stub"), workloads.small_body("stub-n5", stream=True)):
                    answers = []
                    for port in (stub_port, relay_port):
                        url = f"http://127.0.0.1:{port}/v1/chat/completions"
                        async with http.post(url, data=body, headers={"Authorization": "Bearer client"}) as r:
                            answers.append((r.status, r.headers["Content-Type"], await r.read()))
                    assert answers[0] == answers[1]
                    assert answers[1][0] == 200 and answers[1][2]
        finally:
            assert relay.stop() == 0, relay.stderr_text()
    finally:
        stub.stop()
