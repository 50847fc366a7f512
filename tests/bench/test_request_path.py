"""bench/request_path.py works: the small request goes through every step to the client's answer,
and each step is measured (never a timing assertion)."""

from __future__ import annotations

import orjson

from bench import request_path, workloads


def test_every_step_is_measured():
    table = request_path.measure(reps=1, rounds=1)
    assert set(table) == {"decode", "repair", "encode", "decode answer", "fold + answer", "all"}
    assert all(value > 0 for value in table.values())


def test_the_small_request_gets_the_stubs_answer():
    answer = orjson.loads(request_path.whole(workloads.small_body("stub")))
    assert answer["choices"][0]["message"]["content"] == "tok "
    assert answer["usage"]["prompt_tokens"] == 10


def test_every_dialect_decodes_its_agent_request_with_its_tools():
    for dialect, (decode, body) in request_path.agent_bodies().items():
        assert len(decode(body).request.tools) == len(workloads.tools()), dialect
    assert set(request_path.measure_tools(reps=1, rounds=1)) == {"chat", "messages", "responses", "gemini"}
