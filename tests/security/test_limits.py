"""No request may stall the others: a body's size in JSON values and in blocks is refused before
it is parsed or decoded, and counting a large body lets other requests run (bench/stall.py
measures the time; here the behaviour)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from gateway.config import ServerConfig
from gateway.ingress.admission import parse_within_budget
from gateway.ingress.budget import JsonValues, raw_parts, value_bound
from gateway.ingress.errors import ClientError
from gateway.ingress.messages.codec import MessagesCodec
from gateway.simulators.base import Reply
from tests.security.conftest import serving

TINY = {"type": "text", "text": "a"}


def tiny_blocks(n: int) -> dict[str, dict[str, Any]]:
    """Per route, a request of `n` one-character blocks."""
    parts = [TINY] * n
    return {
        "/v1/messages": {
            "model": "claude",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": parts}],
        },
        "/v1/messages/count_tokens": {"model": "claude", "messages": [{"role": "user", "content": parts}]},
        "/v1/chat/completions": {"model": "claude", "messages": [{"role": "user", "content": parts}]},
        "/v1/responses": {
            "model": "claude",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "a"}] * n}],
        },
    }


def code_of(body: bytes) -> str:
    payload = orjson.loads(body)
    if payload.get("type") == "error":  # Anthropic's envelope carries no code: its message names the limit
        message = payload["error"]["message"]
        return "too_many_values" if "max_json_values" in message else "too_many_blocks"
    return payload["error"]["code"]


async def test_a_body_of_too_many_values_is_refused_unparsed(monkeypatch):
    def small(config: dict) -> None:
        config["server"]["max_json_values"] = 1000

    def never(*args: object) -> None:
        raise AssertionError("parsed a body over the value cap")

    async with serving(small) as gateway:
        monkeypatch.setattr("gateway.ingress.split.parse_json_body", never)
        for path, body in tiny_blocks(400).items():  # 400 blocks: 1200 values
            status, _, answer = await gateway.chat(body, path=path)
            assert status == 400 and code_of(answer) == "too_many_values", (path, answer)
        assert sum(len(s.requests) for s in gateway.hub.states.values()) == 0
        monkeypatch.undo()
        # braces and commas inside strings are not values: a body full of code is not refused
        gateway.hub.states["anthropic"].push(Reply(text="ok"))
        code = "{[a, b], {c, d}}, " * 2000
        status, _, answer = await gateway.chat(
            {"model": "claude", "messages": [{"role": "user", "content": code}]}
        )
        assert status == 200, answer
        await gateway.serves_normally()


async def test_a_transcript_over_the_block_limit_is_refused_before_it_is_decoded(monkeypatch):
    def small(config: dict) -> None:
        config["server"]["max_blocks"] = 50
        config["server"]["max_messages"] = 10
        config["server"]["max_tools"] = 10

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded a transcript over the block limit")

    monkeypatch.setattr(MessagesCodec, "decode", never)
    monkeypatch.setattr(MessagesCodec, "decode_count", never)
    async with serving(small) as gateway:
        for path, body in tiny_blocks(80).items():
            status, _, answer = await gateway.chat(body, path=path)
            assert status == 400 and code_of(answer) == "too_many_blocks", (path, answer)
        assert sum(len(s.requests) for s in gateway.hub.states.values()) == 0


async def test_counting_a_large_body_lets_other_requests_run():
    limits = ServerConfig(max_json_values=500_000)  # the body holds 600,000
    raw = orjson.dumps(tiny_blocks(200_000)["/v1/messages"])  # 5.6 MB
    turns = 0

    async def other_request() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_request())
    await asyncio.sleep(0)
    with pytest.raises(ClientError) as refused:
        await parse_within_budget(raw, limits)
    other.cancel()
    assert refused.value.code == "too_many_values"
    assert turns >= 5  # the loop ran the other task between the count's steps


def test_the_value_count_skips_strings_and_stops_where_asked():
    raw = orjson.dumps({"a": [1, 2, {"b": 'x,{[y\\"z,'}], "c": "}}{{,,"})
    values = JsonValues(raw)
    values.step(1_000)
    assert values.done and values.count == 6  # { [ , , { ,
    assert value_bound(raw, 0, len(raw)) >= values.count
    values = JsonValues(orjson.dumps([[0]] * 1000))
    values.step(10)
    assert not values.done and values.count == 10


def test_raw_parts_bound_the_decoded_blocks():
    body = {
        "messages": [{"role": "user", "content": [TINY] * 3}, {"role": "assistant", "content": "x"}],
        "tools": [{"name": "t"}] * 2,
        "contents": [{"parts": [TINY] * 4}],
        "model": "m",
    }
    assert raw_parts(body) == 3 + 1 + 2 + 4
    assert raw_parts([1, 2]) == 0
