"""The OpenAI Responses simulator: every request rule with its exact message/param/status, and the
HTTP surface (auth, stream and JSON shapes like the recorded fixtures, encrypted reasoning issued
and verified on replay, faults, recording)."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub, SimulatorState, ToolCallSpec
from gateway.simulators.openai_responses import validate
from gateway.simulators.responses_rules import check, encrypted_content
from tests.conftest import fixture_path

MODEL = "gpt-5.1"
AUTH = {"Authorization": "Bearer sim-key"}
KEY = "0123456789abcdef0123456789abcdef01234567"
REASONING = {"effort": "medium", "summary": "auto"}
INCLUDE = ["reasoning.encrypted_content"]
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}]


def req(items: Any = "hi", **extra: Any) -> dict:
    return {"model": MODEL, "input": items, "store": False, **extra}


def rs(
    state: SimulatorState, summary: str = "Thinking about it.", key: str = KEY, model: str = MODEL
) -> dict:
    rid = f"rs_{key}"
    texts = [summary] if summary else []
    return {
        "type": "reasoning",
        "id": rid,
        "summary": [{"type": "summary_text", "text": t} for t in texts],
        "encrypted_content": encrypted_content(state, model, rid, texts),
    }


def fc(call_id: str, item_id: str | None = None, name: str = "lookup") -> dict:
    item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"}
    if item_id:
        item["id"] = item_id
    return item


def out(call_id: str, output: str = "42") -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


@pytest.fixture
def state() -> SimulatorState:
    return SimulatorState("openai_responses")


def rejected(state: SimulatorState, body: dict, status: int = 400) -> tuple[str, str | None]:
    rejection = validate(state, body, MODEL)
    assert rejection is not None, "request was accepted"
    assert rejection.status == status and rejection.type == "invalid_request_error"
    return rejection.message, rejection.param


# -- validate ---------------------------------------------------------------------------------


def test_valid_requests_pass(state):
    assert validate(state, req(), MODEL) is None
    items = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
            ],
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"role": "assistant", "content": "plain"},
        {"role": "user", "content": "again"},
    ]
    body = req(
        items,
        instructions="x",
        tools=TOOLS,
        tool_choice="auto",
        reasoning=REASONING,
        include=INCLUDE,
        stream=True,
        max_output_tokens=1000,
    )
    assert validate(state, body, MODEL) is None


def test_store_false_is_required(state):
    # the gateway is stateless; a request that forgets `store: false` must fail loudly here
    for body in ({"model": MODEL, "input": "hi"}, req(store=True)):
        message, param = rejected(state, body)
        assert param == "store" and "'store': false" in message


@pytest.mark.parametrize(
    ("body", "message", "param"),
    [
        ({"input": "hi", "store": False}, "Missing required parameter: 'model'.", "model"),
        (req(foo=1), "Unknown parameter: 'foo'.", "foo"),
        (
            req(max_output_tokens=5),
            (
                "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                "16, but got 5 instead."
            ),
            "max_output_tokens",
        ),
        (
            req(temperature=3),
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
            "temperature",
        ),
        (
            req(reasoning={"effort": "extreme"}),
            (
                "Invalid value: 'extreme'. Supported values are: 'none', 'minimal', "
                "'low', 'medium', 'high', and 'xhigh'."
            ),
            "reasoning.effort",
        ),
        (
            req(reasoning=REASONING, temperature=0.2),
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "temperature",
        ),
        (
            req(tools=[{"type": "function", "parameters": {}}]),
            "Missing required parameter: 'tools[0].name'.",
            "tools[0].name",
        ),
        (
            req(tools=[{"type": "function", "name": "a.b", "parameters": {}}]),
            (
                "Invalid 'tools[0].name': string does not match pattern. Expected a string that matches the pattern "
                "'^[a-zA-Z0-9_-]+$'."
            ),
            "tools[0].name",
        ),
        (
            req(tools=TOOLS, tool_choice={"type": "function", "name": "other"}),
            "Tool choice 'function' not found in 'tools' parameter.",
            "tool_choice",
        ),
        (
            req([{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]),
            "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
            "input[0].content[0]",
        ),
        (
            req([{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]),
            "Invalid value: 'output_text'. Supported values are: 'input_text', 'input_image', and 'input_file'.",
            "input[0].content[0]",
        ),
        (
            req([{"role": "tool", "content": "x"}]),
            "Invalid value: 'tool'. Supported values are: 'assistant', 'system', 'developer', and 'user'.",
            "input[0].role",
        ),
        (
            req([{"role": "user", "content": "x"}, {**fc("call_1"), "arguments": {}}, out("call_1")]),
            "Invalid type for 'input[1].arguments': expected a string, but got object instead.",
            "input[1].arguments",
        ),
        (
            req([{"type": "function_call", "call_id": "call_1", "arguments": "{}"}]),
            "Missing required parameter: 'input[0].name'.",
            "input[0].name",
        ),
    ],
)
def test_shape_rules(state, body, message, param):
    assert rejected(state, body) == (message, param)


def test_call_id_length(state):
    long_id = "call_" + "x" * 70
    assert rejected(state, req([{"role": "user", "content": "x"}, fc(long_id), out(long_id)])) == (
        (
            "Invalid 'input[1].call_id': string too long. Expected a string with maximum length 64, but got a string "
            "with length 75 instead."
        ),
        "input[1].call_id",
    )
    ok = "call_" + "x" * 59
    assert validate(state, req([{"role": "user", "content": "x"}, fc(ok), out(ok)]), MODEL) is None


def test_output_without_call(state):
    assert rejected(state, req([{"role": "user", "content": "x"}, out("call_uelf")])) == (
        "No tool call found for function call output with call_id call_uelf.",
        "input",
    )


def test_call_without_output(state):
    body = req([{"role": "user", "content": "x"}, fc("call_A"), fc("call_B"), out("call_A")])
    assert rejected(state, body) == ("No tool output found for function call call_B.", "input")


def test_duplicate_item_ids(state):
    body = req(
        [
            {"role": "user", "content": "x"},
            fc("call_A", "fc_1"),
            fc("call_B", "fc_1"),
            out("call_A"),
            out("call_B"),
        ]
    )
    assert rejected(state, body) == (
        "Duplicate item found with id fc_1. Remove duplicate items from your input and try again.",
        "input",
    )


def test_item_id_prefixes(state):
    body = req([{"role": "user", "content": "x"}, fc("call_A", "call_A"), out("call_A")])
    assert rejected(state, body) == (
        "Invalid 'input[1].id': 'call_A'. Expected an ID that begins with 'fc'.",
        "input[1].id",
    )


def test_reasoning_replay_verifies_and_counts(state):
    body = req(
        [{"role": "user", "content": "x"}, rs(state), fc("call_A", f"fc_{KEY}_0"), out("call_A")],
        reasoning=REASONING,
        include=INCLUDE,
    )
    assert check(state, body, MODEL) == (None, 1)


def test_bound_call_needs_its_reasoning_item(state):
    body = req([{"role": "user", "content": "x"}, fc("call_A", f"fc_{KEY}_0"), out("call_A")])
    assert rejected(state, body) == (
        (
            f"Item 'fc_{KEY}_0' of type 'function_call' was provided without its required 'reasoning' item: "
            f"'rs_{KEY}'."
        ),
        "input",
    )
    # calls issued without reasoning stand alone
    body = req([{"role": "user", "content": "x"}, fc("call_A", f"fc_{KEY}00"), out("call_A")])
    assert validate(state, body, MODEL) is None


def test_reasoning_needs_its_following_item(state):
    for tail in ([], [{"role": "user", "content": "more"}]):
        body = req([{"role": "user", "content": "x"}, rs(state), *tail])
        assert rejected(state, body) == (
            f"Item 'rs_{KEY}' of type 'reasoning' was provided without its required following item.",
            "input",
        )
    body = req([{"role": "user", "content": "x"}, rs(state), {"role": "assistant", "content": "answer"}])
    assert validate(state, body, MODEL) is None


def test_reasoning_without_encrypted_content_is_not_found(state):
    item = rs(state)
    del item["encrypted_content"]
    body = req([{"role": "user", "content": "x"}, item, {"role": "assistant", "content": "a"}])
    assert rejected(state, body, status=404) == (
        (
            f"Item with id 'rs_{KEY}' not found. Items are not persisted when `store` is set to false. Try again with "
            "`store` set to true, or remove this item from your input."
        ),
        "input",
    )


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s, item: item["summary"][0].update(text="Edited."),
        lambda s, item: item.update(encrypted_content=rs(s, model="gpt-5-mini")["encrypted_content"]),
        lambda s, item: item.update(encrypted_content=rs(SimulatorState("anthropic"))["encrypted_content"]),
        lambda s, item: item.update(encrypted_content="gAAAAABforged"),
    ],
    ids=["edited-summary", "other-model", "other-provider", "forged"],
)
def test_encrypted_content_must_verify(state, tamper):
    item = rs(state)
    tamper(state, item)
    body = req([{"role": "user", "content": "x"}, item, {"role": "assistant", "content": "a"}])
    rejection = validate(state, body, MODEL)
    assert (rejection.status, rejection.message, rejection.code) == (
        400,
        f"The encrypted content for item rs_{KEY} could not be verified.",
        "invalid_encrypted_content",
    )


def test_previous_response_id_cannot_be_found_when_nothing_is_stored(state):
    assert rejected(state, req(previous_response_id="resp_1"), status=404) == (
        "Previous response with id 'resp_1' not found.",
        "previous_response_id",
    )


# -- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Sim:
    state: SimulatorState
    url: str
    session: aiohttp.ClientSession

    async def post(self, body: Any, headers: dict | None = None) -> aiohttp.ClientResponse:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        return await self.session.post(self.url, data=data, headers=AUTH if headers is None else headers)


@pytest.fixture
async def sim():
    async with SimulatorHub() as hub, aiohttp.ClientSession() as session:
        yield Sim(hub.states["openai_responses"], hub.base_url("openai_responses") + "/responses", session)


def parse_sse(raw: bytes) -> list[dict]:
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        data = json.loads(lines["data"])
        assert lines["event"] == data["type"]
        events.append(data)
    return events


def recorded_chunks(name: str) -> list[dict]:
    path = fixture_path("openai-responses", name)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_auth_failures(sim):
    resp = await sim.post(req(), {})
    assert resp.status == 401
    error = (await resp.json())["error"]
    assert error["type"] == "invalid_request_error" and error["code"] is None
    assert error["message"].startswith("You didn't provide an API key.")
    resp = await sim.post(req(), {"Authorization": "Bearer sk-wrong-key-123"})
    assert resp.status == 401
    error = (await resp.json())["error"]
    assert error["code"] == "invalid_api_key" and error["message"].startswith(
        "Incorrect API key provided: sk-"
    )
    assert len(sim.state.requests) == 2 and all(r.rejection.status == 401 for r in sim.state.requests)


async def test_invalid_json(sim):
    resp = await sim.post(b"{nope")
    assert resp.status == 400
    assert (await resp.json())["error"]["message"].startswith(
        "We could not parse the JSON body of your request."
    )


async def test_rejection_body_and_recording(sim):
    body = req([{"role": "user", "content": "x"}, out("call_zzz")])
    resp = await sim.post(body)
    assert resp.status == 400
    assert await resp.json() == {
        "error": {
            "message": "No tool call found for function call output with call_id call_zzz.",
            "type": "invalid_request_error",
            "param": "input",
            "code": None,
        }
    }
    recorded = sim.state.requests[-1]
    assert recorded.path == "/openai_responses/v1/responses" and recorded.body == body
    assert recorded.headers["Authorization"] == "Bearer sim-key"
    assert recorded.rejection.message.startswith("No tool call found")


async def test_stream_matches_recorded_shape(sim):
    sim.state.push(
        Reply(
            text="The final result is 570.",
            reasoning="Compute 12+7, then multiply.",
            chunk_size=5,
            tool_calls=[ToolCallSpec("lookup", {"a": 12, "b": 7})],
        )
    )
    resp = await sim.post(req("compute", tools=TOOLS, reasoning=REASONING, include=INCLUDE, stream=True))
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    events = parse_sse(await resp.read())
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    types = [e["type"] for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    recorded = recorded_chunks("openai-reasoning-encrypted-content.1.chunks.txt")
    assert set(events[0]["response"]) == set(recorded[0]["response"])
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    # reasoning item: the same event sequence as the recording
    reasoning_types = [t for t in types if "reasoning" in t]
    assert reasoning_types == ["response.reasoning_summary_part.added"] + [
        "response.reasoning_summary_text.delta"
    ] * 6 + ["response.reasoning_summary_text.done", "response.reasoning_summary_part.done"]
    summary = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta")
    assert summary == "Compute 12+7, then multiply."
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [e["item"]["type"] for e in added] == ["reasoning", "message", "function_call"]
    assert [e["output_index"] for e in done] == [0, 1, 2]
    rs_added, rs_done = added[0]["item"], done[0]["item"]
    assert set(rs_added) == set(recorded[2]["item"]) and rs_added["summary"] == []
    assert rs_added["encrypted_content"] != rs_done["encrypted_content"]  # use the one from .done
    assert rs_done["summary"] == [{"type": "summary_text", "text": summary}]
    assert rs_done["encrypted_content"] == encrypted_content(sim.state, MODEL, rs_done["id"], [summary])
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "The final result is 570."
    call_added = added[2]["item"]
    assert set(call_added) == set(recorded[39]["item"]) and call_added["arguments"] == ""
    arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"a": 12, "b": 7}
    assert done[2]["item"]["id"] == "fc_" + rs_done["id"][3:] + "_0"
    completed = events[-1]["response"]
    assert completed["status"] == "completed" and [i["type"] for i in completed["output"]] == [
        "reasoning",
        "message",
        "function_call",
    ]
    usage = completed["usage"]
    assert set(usage) == set(recorded[55]["response"]["usage"])
    assert usage["output_tokens_details"]["reasoning_tokens"] >= 1
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


async def test_no_reasoning_unless_requested(sim):
    sim.state.push(
        Reply(text="ok", reasoning="hidden", tool_calls=[ToolCallSpec("lookup")]),
        Reply(text="ok", reasoning="hidden"),
    )
    body = await (await sim.post(req(tools=TOOLS))).json()
    assert [i["type"] for i in body["output"]] == ["message", "function_call"]
    assert body["output"][1]["arguments"] == "{}"
    assert body["usage"]["output_tokens_details"]["reasoning_tokens"] == 0
    body = await (await sim.post(req(reasoning={"effort": "none"}))).json()
    assert [i["type"] for i in body["output"]] == ["message"]


async def test_summary_and_encrypted_content_only_when_asked(sim):
    sim.state.push(Reply(text="ok", reasoning="private thoughts"))
    body = await (await sim.post(req(reasoning={"effort": "low"}))).json()
    item = body["output"][0]
    assert item["type"] == "reasoning" and item["summary"] == [] and "encrypted_content" not in item
    assert body["usage"]["output_tokens_details"]["reasoning_tokens"] >= 1


async def test_non_stream_response_shape(sim):
    sim.state.push(Reply(text="570", reasoning="Reporting final result."))
    resp = await sim.post(req(reasoning=REASONING, include=INCLUDE))
    body = await resp.json()
    recorded = orjson.loads(
        fixture_path("openai-responses", "openai-reasoning-encrypted-content.1.json").read_bytes()
    )
    assert set(body) == set(recorded) - {"billing"}
    assert body["object"] == "response" and body["status"] == "completed" and body["store"] is False
    assert [set(i) for i in body["output"]] == [set(i) for i in recorded["output"]]
    assert set(body["usage"]) == set(recorded["usage"])


async def test_truncation_is_incomplete(sim):
    sim.state.push(Reply(text="partial", stop="length"), Reply(text="partial", stop="length"))
    body = await (await sim.post(req(max_output_tokens=16))).json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    events = parse_sse(await (await sim.post(req(max_output_tokens=16, stream=True))).read())
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_tool_loop_replay_verifies_tokens(sim):
    sim.state.push(
        Reply(reasoning="Look it up.", tool_calls=[ToolCallSpec("lookup", {"q": "x"})]), Reply(text="42")
    )
    first = req([{"role": "user", "content": "find x"}], tools=TOOLS, reasoning=REASONING, include=INCLUDE)
    answer = await (await sim.post(first)).json()
    reasoning_item, call = answer["output"]
    follow = copy.deepcopy(first)
    follow["input"] += [reasoning_item, call, out(call["call_id"])]
    resp = await sim.post(follow)
    assert resp.status == 200, await resp.text()
    assert sim.state.verified_tokens == 1

    without_reasoning = copy.deepcopy(first)
    without_reasoning["input"] += [call, out(call["call_id"])]
    resp = await sim.post(without_reasoning)
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == (
        f"Item '{call['id']}' of type 'function_call' was provided without its required 'reasoning' item: "
        f"'{reasoning_item['id']}'."
    )
    resp = await sim.post({**follow, "model": "gpt-5-mini"})
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == (
        f"The encrypted content for item {reasoning_item['id']} could not be verified."
    )
    assert sim.state.verified_tokens == 1


async def test_fault_statuses(sim):
    sim.state.push(
        Fault(status=429, retry_after=2.5),
        Fault(status=429, error_type="insufficient_quota"),
        Fault(status=500),
        Fault(status=503),
    )
    resp = await sim.post(req())
    assert resp.status == 429 and resp.headers["retry-after"] == "2.5"
    assert (await resp.json())["error"]["code"] == "rate_limit_exceeded"
    resp = await sim.post(req())
    recorded = orjson.loads(fixture_path("openai-responses", "openai-error.1.json").read_bytes())
    assert resp.status == 429 and await resp.json() == recorded
    resp = await sim.post(req())
    assert resp.status == 500 and (await resp.json())["error"]["type"] == "server_error"
    resp = await sim.post(req())
    assert resp.status == 503 and (await resp.json())["error"]["code"] == "server_is_overloaded"


async def test_fault_delay_and_reset(sim):
    sim.state.push(Fault(delay=0.3, reply=Reply(text="late")), Fault(reset_before_headers=True))
    started = time.monotonic()
    body = await (await sim.post(req())).json()
    assert time.monotonic() - started >= 0.3 and body["output"][0]["content"][0]["text"] == "late"
    with pytest.raises(aiohttp.ClientError):
        await sim.post(req())
    assert len(sim.state.requests) == 2


async def test_mid_stream_error_like_recording(sim):
    sim.state.push(Fault(after_events=2, error_type="insufficient_quota", reply=Reply(text="never sent")))
    events = parse_sse(await (await sim.post(req(stream=True))).read())
    recorded = recorded_chunks("openai-error.1.chunks.txt")
    assert [e["type"] for e in events] == [e["type"] for e in recorded]
    assert [e["sequence_number"] for e in events] == [0, 1, 2, 3]
    assert events[2] == recorded[2]
    assert events[3]["response"]["status"] == "failed"
    assert events[3]["response"]["error"] == recorded[3]["response"]["error"]


async def test_mid_stream_default_error_and_reset(sim):
    sim.state.push(
        Fault(after_events=3, reply=Reply(text="abcdefghijkl", chunk_size=2)),
        Fault(after_events=4, mid_stream="reset", reply=Reply(text="x" * 100, chunk_size=2)),
    )
    events = parse_sse(await (await sim.post(req(stream=True))).read())
    assert [e["type"] for e in events[3:]] == ["error", "response.failed"]
    assert events[3]["error"]["code"] == "server_error"
    resp = await sim.post(req(stream=True))
    received = b""
    with pytest.raises(aiohttp.ClientError):
        async for chunk in resp.content.iter_any():
            received += chunk
    assert received.count(b"event: ") == 4


async def test_non_stream_mid_stream_fault_is_server_error(sim):
    sim.state.push(Fault(after_events=1))
    resp = await sim.post(req())
    assert resp.status == 500 and (await resp.json())["error"]["type"] == "server_error"
