"""The chat-completions simulators over loopback HTTP: wire formats, reasoning, ids, faults."""

from __future__ import annotations

import re
import time
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec
from tests.conftest import fixture_path

KEY = "sim-key"
KINDS = ("openai_chat", "deepseek", "kimi", "mistral")
MODELS = {
    "openai_chat": "gpt-4o-mini",
    "deepseek": "deepseek-chat",
    "kimi": "kimi-k2-0905-preview",
    "mistral": "mistral-small-latest",
}


def parse_sse(raw: bytes) -> list[Any]:
    events = []
    for block in raw.split(b"\n\n"):
        if block:
            assert block.startswith(b"data: ")
            payload = block.removeprefix(b"data: ")
            events.append("[DONE]" if payload == b"[DONE]" else orjson.loads(payload))
    return events


def cassette_events(name: str) -> list[dict]:
    """The `data:` payloads of the first streamed answer of a pydantic-ai cassette."""
    lines = fixture_path(*name.split("/")).read_text().splitlines()
    out = []
    for line in lines:
        text = line.strip()
        if text.startswith("data: {"):
            out.append(orjson.loads(text.removeprefix("data: ")))
        elif text == "data: [DONE]":
            return out
    return out


def chunks_file(name: str) -> list[dict]:
    return [orjson.loads(line) for line in fixture_path(*name.split("/")).read_bytes().splitlines()]


@pytest.fixture
async def hub() -> Any:
    async with SimulatorHub(api_key=KEY) as running:
        yield running


@pytest.fixture
async def session() -> Any:
    async with aiohttp.ClientSession() as client:
        yield client


async def post(
    session: aiohttp.ClientSession, hub: SimulatorHub, kind: str, body: dict, key: str | None = KEY
) -> tuple[int, bytes, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with session.post(f"{hub.base_url(kind)}/chat/completions", json=body, headers=headers) as resp:
        return resp.status, await resp.read(), resp.headers


def chat(kind: str, *messages: dict, **extra: Any) -> dict:
    return {"model": MODELS[kind], "messages": list(messages) or [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize(
    ("kind", "expected_keys"),
    [
        ("openai_chat", {"message", "type", "param", "code"}),
        ("deepseek", {"message", "type", "param", "code"}),
        ("kimi", {"message", "type"}),
    ],
)
async def test_auth_failure_is_401_in_the_provider_envelope(
    hub: SimulatorHub, session: aiohttp.ClientSession, kind: str, expected_keys: set[str]
) -> None:
    for key in (None, "wrong"):
        status, raw, _ = await post(session, hub, kind, chat(kind), key)
        assert status == 401 and set(orjson.loads(raw)["error"]) == expected_keys
    assert [r.rejection.status for r in hub.states[kind].requests] == [401, 401]


async def test_mistral_auth_failure(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    status, raw, _ = await post(session, hub, "mistral", chat("mistral"), "wrong")
    payload = orjson.loads(raw)
    assert status == 401 and payload["object"] == "error" and payload["message"] == "Unauthorized"


@pytest.mark.parametrize("kind", KINDS)
async def test_invalid_json_is_400_and_recorded(
    hub: SimulatorHub, session: aiohttp.ClientSession, kind: str
) -> None:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with session.post(f"{hub.base_url(kind)}/chat/completions", data=b"{oops", headers=headers) as resp:
        assert resp.status == 400
    recorded = hub.states[kind].requests[-1]
    assert recorded.body is None and recorded.rejection is not None


async def test_openai_tool_call_stream_matches_recording(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    recorded = cassette_events("openai-chat/test_run_stream_sync_streams_real_model.yaml")
    hub.states["openai_chat"].push(
        Reply(tool_calls=[ToolCallSpec("get_capital", {"country": "UK"})], chunk_size=5)
    )
    body = chat(
        "openai_chat",
        stream=True,
        stream_options={"include_usage": True},
        tools=[{"type": "function", "function": {"name": "get_capital"}}],
    )
    status, raw, headers = await post(session, hub, "openai_chat", body)
    events = parse_sse(raw)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    recorded_keys = [set(r) - {"obfuscation"} for r in recorded]
    assert all(set(c) == recorded_keys[0] for c in chunks[:-1]) and set(chunks[-1]) == recorded_keys[-1]
    first = chunks[0]["choices"][0]["delta"]
    assert set(first) == set(recorded[0]["choices"][0]["delta"])
    head = first["tool_calls"][0]
    assert first["role"] == "assistant" and first["content"] is None
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", head["id"]) and head["function"] == {
        "name": "get_capital",
        "arguments": "",
    }
    fragments = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[1:-2]]
    assert all(set(f) == {"index", "function"} for f in fragments)
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"country":"UK"}'
    assert chunks[-2]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert chunks[-1]["choices"] == [] and set(chunks[-1]["usage"]) == set(recorded[-1]["usage"])
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_openai_text_stream_without_usage_and_non_stream_body(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    recorded = orjson.loads(fixture_path("openai-chat", "openai-text.json").read_bytes())
    state = hub.states["openai_chat"]
    state.push(
        Reply(text="Hello there!", reasoning="never shown", chunk_size=4),
        Reply(text="Hi.", reasoning="hidden"),
    )
    _, raw, _ = await post(session, hub, "openai_chat", chat("openai_chat", stream=True))
    chunks = parse_sse(raw)[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == ["Hell", "o th", "ere!"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["choices"]
    assert not any("reasoning_content" in c["choices"][0]["delta"] for c in chunks)
    status, raw, _ = await post(session, hub, "openai_chat", chat("openai_chat"))
    payload = orjson.loads(raw)
    assert status == 200 and set(payload) == set(recorded)
    assert set(payload["choices"][0]["message"]) == set(recorded["choices"][0]["message"])
    assert payload["choices"][0]["message"]["content"] == "Hi."
    assert set(payload["usage"]) == set(recorded["usage"])


async def test_deepseek_reasoner_stream_and_replay(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    recorded = chunks_file("deepseek/deepseek-tool-call.chunks.txt")
    state = hub.states["deepseek"]
    state.push(
        Reply(
            text="",
            reasoning="Use the weather tool.",
            tool_calls=[ToolCallSpec("weather", {"location": "SF"})],
        )
    )
    request = chat("deepseek", stream=True)
    request["model"] = "deepseek-reasoner"
    _, raw, _ = await post(session, hub, "deepseek", request)
    chunks = parse_sse(raw)[:-1]
    assert chunks[0]["choices"][0]["delta"] == recorded[0]["choices"][0]["delta"]
    assert all(set(c) == set(recorded[0]) for c in chunks)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    assert reasoning == "Use the weather tool."
    head = next(
        c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["choices"][0]["delta"]
    )
    assert re.fullmatch(r"call_00_[A-Za-z0-9]{24}", head["id"])
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    assert set(final["usage"]) == set(recorded[-1]["usage"])
    assert final["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0

    call = {
        "id": head["id"],
        "type": "function",
        "function": {"name": "weather", "arguments": '{"location":"SF"}'},
    }
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    history = [
        request["messages"][0],
        {**turn, "reasoning_content": reasoning},
        {"role": "tool", "tool_call_id": head["id"], "content": "sunny"},
    ]
    status, _, _ = await post(session, hub, "deepseek", {**request, "messages": history})
    assert status == 200
    status, raw, _ = await post(
        session, hub, "deepseek", {**request, "messages": [history[0], turn, history[2]]}
    )
    assert status == 400
    assert orjson.loads(raw)["error"]["message"].startswith(
        "Missing reasoning_content field in the assistant message at message index 1."
    )


async def test_deepseek_chat_does_not_reason(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["deepseek"].push(Reply(text="plain", reasoning="hidden"))
    _, raw, _ = await post(session, hub, "deepseek", chat("deepseek"))
    message = orjson.loads(raw)["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "plain"}


async def test_kimi_ids_usage_placement_and_warnings(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    recorded = chunks_file("moonshotai/moonshotai-usage-live.chunks.txt")
    state = hub.states["kimi"]
    state.push(
        Reply(
            text="ok",
            reasoning="thinking",
            tool_calls=[ToolCallSpec("search", {"q": "a"}), ToolCallSpec("open", {})],
        )
    )
    earlier = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "",
        "tool_calls": [
            {"id": "call_foreign", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        ],
    }
    messages = [
        {"role": "user", "content": "hi"},
        earlier,
        {"role": "tool", "tool_call_id": "call_foreign", "content": "r"},
        {"role": "user", "content": "go"},
    ]
    body = {"model": "kimi-k2-thinking", "messages": messages, "stream": True}
    status, raw, _ = await post(session, hub, "kimi", body)
    assert status == 200
    chunks = parse_sse(raw)[:-1]
    assert (
        "".join(c["choices"][0]["delta"].get("reasoning_content", "") for c in chunks if c["choices"])
        == "thinking"
    )
    ids = [
        tc["id"]
        for c in chunks
        if c["choices"]
        for tc in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" in tc
    ]
    assert ids == ["functions.search:1", "functions.open:2"]
    finish, trailing = chunks[-2], chunks[-1]
    assert (
        set(finish["choices"][0]) == set(recorded[-2]["choices"][0])
        and finish["choices"][0]["finish_reason"] == "tool_calls"
    )
    assert trailing["choices"] == [] and trailing["usage"] == finish["choices"][0]["usage"]
    assert set(trailing["usage"]) == set(recorded[-1]["usage"])
    assert state.quality_warnings == [
        "messages[1].tool_calls[0].id 'call_foreign' is not a native Kimi id (expected 'functions.search:0')"
    ]


async def test_mistral_whole_tool_call_chunk(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    recorded = chunks_file("mistral/mistral-tool-call.chunks.txt")
    hub.states["mistral"].push(Reply(tool_calls=[ToolCallSpec("weather", {"location": "San Francisco"})]))
    _, raw, _ = await post(session, hub, "mistral", chat("mistral", stream=True))
    events = parse_sse(raw)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len(chunks) == len(recorded)
    assert chunks[0]["choices"][0]["delta"] == recorded[0]["choices"][0]["delta"]
    delta, want = chunks[1]["choices"][0]["delta"], recorded[1]["choices"][0]["delta"]
    assert set(delta) == set(want) and set(delta["tool_calls"][0]) == set(want["tool_calls"][0])
    assert re.fullmatch(r"[A-Za-z0-9]{9}", delta["tool_calls"][0]["id"])
    assert delta["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"location":"San Francisco"}',
    }
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls" and set(chunks[1]["usage"]) == set(
        recorded[1]["usage"]
    )


async def test_magistral_thinking_stream_and_body(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    recorded = orjson.loads(fixture_path("mistral", "mistral-reasoning-history-live.json").read_bytes())
    state = hub.states["mistral"]
    state.push(
        Reply(text="391", reasoning="17*23 = 391", chunk_size=6), Reply(text="391", reasoning="17*23 = 391")
    )
    body = {
        "model": "magistral-medium-latest",
        "messages": [{"role": "user", "content": "17*23?"}],
        "stream": True,
    }
    _, raw, _ = await post(session, hub, "mistral", body)
    deltas = [c["choices"][0]["delta"] for c in parse_sse(raw)[:-1]]
    thinking = [d["content"][0]["thinking"] for d in deltas if isinstance(d.get("content"), list)]
    assert thinking == [[{"type": "text", "text": "17*23 "}], [{"type": "text", "text": "= 391"}], []]
    assert [d["content"] for d in deltas if isinstance(d.get("content"), str)] == ["", "391", ""]
    _, raw, _ = await post(session, hub, "mistral", {**body, "stream": False})
    message = orjson.loads(raw)["choices"][0]["message"]
    assert [set(p) for p in message["content"]] == [
        set(p) for p in recorded["choices"][0]["message"]["content"]
    ]
    replay = {
        **body,
        "stream": False,
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": "and 18*23?"},
        ],
    }
    status, _, _ = await post(session, hub, "mistral", replay)
    assert status == 200


async def test_request_recording_and_rejection(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    body = chat(
        "openai_chat",
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    )
    status, raw, _ = await post(session, hub, "openai_chat", body)
    assert status == 400 and orjson.loads(raw)["error"]["param"] == "messages.[1].role"
    recorded = hub.states["openai_chat"].requests[-1]
    assert recorded.path == "/openai_chat/v1/chat/completions" and recorded.body == body
    assert recorded.headers["Authorization"] == f"Bearer {KEY}"
    assert recorded.rejection is not None and recorded.rejection.message.startswith(
        "Invalid parameter: messages with role 'tool'"
    )


# -- faults ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
async def test_429_with_retry_after(hub: SimulatorHub, session: aiohttp.ClientSession, kind: str) -> None:
    hub.states[kind].push(Fault(status=429, retry_after=2))
    status, raw, headers = await post(session, hub, kind, chat(kind))
    assert status == 429 and headers["retry-after"] == "2"
    payload = orjson.loads(raw)
    error = payload if kind == "mistral" else payload["error"]
    assert error["type"] and error["message"]


async def test_server_error_body(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["openai_chat"].push(Fault(status=503, message="Overloaded right now"))
    status, raw, headers = await post(session, hub, "openai_chat", chat("openai_chat"))
    assert status == 503 and "retry-after" not in headers
    assert orjson.loads(raw) == {
        "error": {
            "message": "Overloaded right now",
            "type": "server_error",
            "param": None,
            "code": "server_is_overloaded",
        }
    }


async def test_delay_before_headers(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["kimi"].push(Fault(delay=0.3))
    started = time.monotonic()
    status, _, _ = await post(session, hub, "kimi", chat("kimi"))
    assert status == 200 and time.monotonic() - started >= 0.3


@pytest.mark.parametrize("stream", [True, False])
async def test_reset_before_headers(hub: SimulatorHub, session: aiohttp.ClientSession, stream: bool) -> None:
    hub.states["deepseek"].push(Fault(reset_before_headers=True))
    with pytest.raises(aiohttp.ClientConnectionError):
        await post(session, hub, "deepseek", chat("deepseek", stream=stream))


@pytest.mark.parametrize("kind", KINDS)
async def test_mid_stream_error_after_n_events(
    hub: SimulatorHub, session: aiohttp.ClientSession, kind: str
) -> None:
    hub.states[kind].push(Fault(after_events=3, status=500, reply=Reply(text="x" * 100, chunk_size=10)))
    status, raw, _ = await post(session, hub, kind, chat(kind, stream=True))
    events = parse_sse(raw)
    assert status == 200 and len(events) == 4
    assert all("choices" in e for e in events[:3])
    assert set(events[3]) == {"error"} and events[3]["error"]["message"]


async def test_mid_stream_reset_after_n_events(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["openai_chat"].push(
        Fault(after_events=2, mid_stream="reset", reply=Reply(text="y" * 80, chunk_size=8))
    )
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):
        async with session.post(
            f"{hub.base_url('openai_chat')}/chat/completions",
            json=chat("openai_chat", stream=True),
            headers={"Authorization": f"Bearer {KEY}"},
        ) as resp:
            async for piece in resp.content.iter_any():
                received += piece
    assert received.count(b"data: ") == 2
