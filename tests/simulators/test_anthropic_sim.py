"""The Anthropic simulator: every request rule with its exact message, and the HTTP surface
(auth, stream and JSON shapes like the recorded fixtures, continuity tokens, faults, recording)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators.anthropic import validate
from gateway.simulators.anthropic_rules import check, redacted_data, thinking_signature
from gateway.simulators.base import Fault, Reply, SimulatorHub, SimulatorState, ToolCallSpec
from tests.conftest import fixture_path

MODEL = "claude-sonnet-4-5"
HEADERS = {"x-api-key": "sim-key", "anthropic-version": "2023-06-01"}


def req(*messages: dict, **extra: Any) -> dict:
    return {"model": MODEL, "max_tokens": 4096, "messages": list(messages), **extra}


def user(content: Any) -> dict:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict:
    return {"role": "assistant", "content": content}


def tool_use(tool_id: str, name: str = "lookup", args: dict | None = None) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args or {}}


def tool_result(tool_id: str, content: Any = "ok") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def thinking(state: SimulatorState, value: str, model: str = MODEL) -> dict:
    return {"type": "thinking", "thinking": value, "signature": thinking_signature(state, model, value)}


THINKING_ON = {"type": "enabled", "budget_tokens": 2048}


@pytest.fixture
def state() -> SimulatorState:
    return SimulatorState("anthropic")


def rejected(state: SimulatorState, body: dict) -> str:
    rejection = validate(state, body, body.get("model", MODEL))
    assert rejection is not None, "request was accepted"
    assert rejection.status == 400 and rejection.type == "invalid_request_error"
    return rejection.message


# -- validate: shape --------------------------------------------------------------------------


def test_valid_minimal_request_passes(state):
    assert validate(state, req(user("hi")), MODEL) is None
    assert (
        validate(
            state,
            req(user([text("hi")]), assistant("hello"), user("more"), system="be brief", tools=[]),
            MODEL,
        )
        is None
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.pop("max_tokens"), "max_tokens: Field required"),
        (lambda b: b.pop("model"), "model: Field required"),
        (lambda b: b.pop("messages"), "messages: Field required"),
        (lambda b: b.update(max_tokens=0), "max_tokens: Input should be greater than or equal to 1"),
        (lambda b: b.update(max_tokens="10"), "max_tokens: Input should be a valid integer"),
        (lambda b: b.update(messages=[]), "messages: at least one message is required"),
        (lambda b: b.update(reasoning_effort="high"), "reasoning_effort: Extra inputs are not permitted"),
        (lambda b: b.update(temperature=1.5), "temperature: Input should be less than or equal to 1"),
        (
            lambda b: b["messages"][0].update(role="system"),
            "messages.0.role: Input should be 'user' or 'assistant'",
        ),
        (lambda b: b["messages"][0].update(name="x"), "messages.0.name: Extra inputs are not permitted"),
        (
            lambda b: b["messages"][0].update(content=[{"type": "text", "text": "a", "signature": "s"}]),
            "messages.0.content.0.text.signature: Extra inputs are not permitted",
        ),
        (
            lambda b: b["messages"][0].update(content=[{"type": "video"}]),
            (
                "messages.0.content.0: Input tag 'video' found using 'type' does not match any of the expected tags: "
                "'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking', "
                "'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', "
                "'code_execution_tool_result', 'bash_code_execution_tool_result', "
                "'text_editor_code_execution_tool_result'"
            ),
        ),
        (
            lambda b: b["messages"][0].update(content=[text("")]),
            "messages: text content blocks must be non-empty",
        ),
        (
            lambda b: b["messages"][0].update(content=[text("  ")]),
            "messages: text content blocks must contain non-whitespace text",
        ),
    ],
)
def test_shape_rules(state, mutate, message):
    body = req(user("hi"))
    mutate(body)
    assert rejected(state, body) == message


def test_roles_must_alternate_starting_with_user(state):
    assert (
        rejected(state, req(assistant("hi"), user("x"))) == 'messages: first message must use the "user" role'
    )
    assert rejected(state, req(user("a"), user("b"))) == (
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'
    )


def test_empty_content_only_for_final_assistant(state):
    expected = (
        "messages.1: all messages must have non-empty content except for the optional final assistant message"
    )
    assert rejected(state, req(user("a"), assistant([]), user("b"))) == expected
    assert rejected(state, req(user("a"), assistant(""), user("b"))) == expected
    assert validate(state, req(user("a"), assistant([])), MODEL) is None
    assert rejected(state, req(user("a"), assistant("prefill "))) == (
        "messages: final assistant content cannot end with trailing whitespace"
    )


def test_blocks_only_in_their_role(state):
    body = req(user([tool_use("toolu_1")]))
    assert (
        rejected(state, body)
        == "messages.0.content.0.type: `tool_use` blocks are not allowed in `user` messages"
    )
    body = req(user("a"), assistant([tool_result("toolu_1")]))
    assert "blocks are not allowed in `assistant` messages" in rejected(state, body)


def test_image_blocks(state):
    good = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert validate(state, req(user([good, text("what is this?")])), MODEL) is None
    bad = copy.deepcopy(good)
    bad["source"]["media_type"] = "image/tiff"
    assert rejected(state, req(user([bad]))) == (
        "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
        "'image/gif' or 'image/webp'"
    )


def test_tool_use_id_pattern(state):
    body = req(user("a"), assistant([tool_use("call.1")]), user([tool_result("call.1")]))
    assert (
        rejected(state, body)
        == "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    )
    body = req(user("a"), assistant([tool_use("t1")]), user([tool_result("t 1")]))
    assert rejected(state, body) == (
        "messages.2.content.0.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    )


def test_tool_use_input_must_be_object(state):
    block = tool_use("t1")
    block["input"] = "{}"
    body = req(user("a"), assistant([block]), user([tool_result("t1")]))
    assert rejected(state, body) == "messages.1.content.0.tool_use.input: Input should be a valid dictionary"


def test_tool_use_ids_unique(state):
    body = req(user("a"), assistant([tool_use("t1"), tool_use("t1")]), user([tool_result("t1")]))
    assert rejected(state, body) == "messages.1.content.1: `tool_use` ids must be unique"
    body = req(
        user("a"),
        assistant([tool_use("t1")]),
        user([tool_result("t1")]),
        assistant([tool_use("t1")]),
        user([tool_result("t1")]),
    )
    assert rejected(state, body) == "messages.3.content.0: `tool_use` ids must be unique"


def test_tool_names_unique(state):
    tool = {"name": "lookup", "input_schema": {"type": "object"}}
    assert validate(state, req(user("a"), tools=[tool]), MODEL) is None
    assert rejected(state, req(user("a"), tools=[tool, dict(tool)])) == "tools: Tool names must be unique."
    assert (
        rejected(state, req(user("a"), tools=[{"name": "lookup"}]))
        == "tools.0.custom.input_schema: Field required"
    )
    assert rejected(state, req(user("a"), tools=[{"name": "a.b", "input_schema": {"type": "object"}}])) == (
        "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"
    )


def test_tool_use_without_results_lists_every_missing_id(state):
    body = req(
        user("a"),
        assistant([text("calling"), tool_use("toolu_A"), tool_use("toolu_B"), tool_use("toolu_C")]),
        user([tool_result("toolu_B")]),
    )
    assert rejected(state, body) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A, toolu_C. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    assert rejected(state, req(user("a"), assistant([tool_use("toolu_A")]), user("next"))).startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A."
    )


def test_results_must_open_the_next_message(state):
    body = req(user("a"), assistant([tool_use("toolu_A")]), user([text("first"), tool_result("toolu_A")]))
    assert rejected(state, body).startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks"
    )
    body = req(user("a"), assistant([tool_use("toolu_A")]), user([tool_result("toolu_A"), text("and then")]))
    assert validate(state, body, MODEL) is None


def test_unexpected_tool_result_matches_recorded_error(state):
    recorded = orjson.loads(
        fixture_path("anthropic", "anthropic-issue-21832-unexpected-tool-use-id.json").read_bytes()
    )
    body = req(user([text("hi"), tool_result("T1")]))
    assert rejected(state, body) == recorded["error"]["message"]


def test_duplicate_tool_result(state):
    body = req(user("a"), assistant([tool_use("t1")]), user([tool_result("t1"), tool_result("t1")]))
    assert rejected(state, body) == (
        "messages.2.content.1: each tool_use must have a single result. Found multiple `tool_result` blocks with id: t1"
    )


def test_tool_result_content_blocks(state):
    body = req(user("a"), assistant([tool_use("t1")]), user([tool_result("t1", [text("42")])]))
    assert validate(state, body, MODEL) is None
    body["messages"][2]["content"][0]["content"] = [{"type": "tool_use"}]
    assert rejected(state, body) == (
        "messages.2.content.0.tool_result.content.0: Input tag 'tool_use' found using 'type' does not match any of "
        "the expected tags: 'text', 'image', 'document'"
    )


# -- validate: thinking -----------------------------------------------------------------------


def test_thinking_config_rules(state):
    assert validate(state, req(user("a"), thinking=THINKING_ON), MODEL) is None
    assert rejected(state, req(user("a"), thinking={"type": "enabled", "budget_tokens": 1000})) == (
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    )
    assert rejected(state, req(user("a"), max_tokens=2048, thinking=THINKING_ON)).startswith(
        "`max_tokens` must be greater than `thinking.budget_tokens`."
    )
    assert rejected(state, req(user("a"), thinking=THINKING_ON, temperature=0.5)).startswith(
        "`temperature` may only be set to 1 when thinking is enabled."
    )
    assert validate(state, req(user("a"), thinking=THINKING_ON, temperature=1), MODEL) is None
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    assert rejected(
        state, req(user("a"), thinking=THINKING_ON, tools=tools, tool_choice={"type": "any"})
    ) == ("Thinking may not be enabled when tool_choice forces tool use.")


@pytest.mark.parametrize(
    ("first", "found"), [(text("let me look"), "text"), (tool_use("toolu_A"), "tool_use")]
)
def test_thinking_enabled_tool_loop_must_start_with_thinking(state, first, found):
    content = [first] if first["type"] == "tool_use" else [first, tool_use("toolu_A")]
    body = req(user("a"), assistant(content), user([tool_result("toolu_A")]), thinking=THINKING_ON)
    assert rejected(state, body) == (
        f"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
        "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
        "previous turns. To avoid this requirement, disable `thinking`."
    )
    # the same transcript is fine without thinking, and once a new user turn starts
    body.pop("thinking")
    assert validate(state, body, MODEL) is None
    body = req(
        user("a"),
        assistant(content),
        user([tool_result("toolu_A")]),
        assistant("done"),
        user("next"),
        thinking=THINKING_ON,
    )
    assert validate(state, body, MODEL) is None


def test_tool_loop_is_judged_by_the_message_that_opened_it(state):
    opener = assistant([thinking(state, "plan"), tool_use("toolu_A")])
    body = req(
        user("a"),
        opener,
        user([tool_result("toolu_A")]),
        assistant([tool_use("toolu_B")]),
        user([tool_result("toolu_B")]),
        thinking=THINKING_ON,
    )
    assert validate(state, body, MODEL) is None
    body["messages"][1] = assistant([text("no plan"), tool_use("toolu_A")])
    assert rejected(state, body).startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`"
    )


def test_thinking_block_placement(state):
    body = req(user("a"), assistant([text("x"), thinking(state, "t"), text("y")]), user("b"))
    assert rejected(state, body) == (
        "messages.1.content.0: If an assistant message contains any thinking blocks, the first block must be "
        "thinking or redacted_thinking. Found text."
    )
    body = req(user("a"), assistant([thinking(state, "t")]), user("b"))
    assert (
        rejected(state, body) == "messages.1: The final block in an assistant message cannot be `thinking`."
    )
    body = req(user("a"), assistant([thinking(state, "t"), text("prefill")]))
    assert rejected(state, body) == (
        "messages.1.content.0: When thinking is disabled, an `assistant` message in the final position cannot "
        "contain `thinking`. To use thinking blocks, enable `thinking` in your request."
    )


def test_signatures_verify_and_are_counted(state):
    redacted = {"type": "redacted_thinking", "data": redacted_data(state, MODEL, "0" * 32)}
    body = req(
        user("a"),
        assistant([thinking(state, "plan"), redacted, tool_use("toolu_A")]),
        user([tool_result("toolu_A")]),
        thinking=THINKING_ON,
    )
    assert check(state, body, MODEL) == (None, 2)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s, b: b.update(thinking="edited plan"),
        lambda s, b: b.update(signature=thinking_signature(s, "claude-opus-4-1", "plan")),
        lambda s, b: b.update(signature=thinking_signature(SimulatorState("gemini"), MODEL, "plan")),
        lambda s, b: b.update(signature="EqQBCkYIBxgCKkDforged"),
    ],
    ids=["edited", "other-model", "other-provider", "forged"],
)
def test_bad_signatures_rejected(state, tamper):
    block = thinking(state, "plan")
    tamper(state, block)
    body = req(
        user("a"),
        assistant([block, tool_use("toolu_A")]),
        user([tool_result("toolu_A")]),
        thinking=THINKING_ON,
    )
    assert rejected(state, body) == "messages.1.content.0: Invalid `signature` in `thinking` block"
    body.pop("thinking")  # signatures are verified whether or not thinking is on
    assert rejected(state, body) == "messages.1.content.0: Invalid `signature` in `thinking` block"


def test_bad_redacted_data_rejected(state):
    data = redacted_data(state, MODEL, "1" * 32)
    for forged in (data.replace("1", "2", 1), redacted_data(state, "claude-opus-4-1", "1" * 32), "short"):
        body = req(
            user("a"), assistant([{"type": "redacted_thinking", "data": forged}, text("hi")]), user("b")
        )
        assert rejected(state, body) == "messages.1.content.0: Invalid `data` in `redacted_thinking` block"


# -- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Sim:
    state: SimulatorState
    url: str
    session: aiohttp.ClientSession

    async def post(self, body: Any, headers: dict | None = None) -> aiohttp.ClientResponse:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        return await self.session.post(self.url, data=data, headers=HEADERS if headers is None else headers)


@pytest.fixture
async def sim():
    async with SimulatorHub() as hub, aiohttp.ClientSession() as session:
        yield Sim(hub.states["anthropic"], hub.base_url("anthropic") + "/v1/messages", session)


def parse_sse(raw: bytes) -> list[tuple[str, dict]]:
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def fixture_events(name: str) -> list[dict]:
    return [
        json.loads(line) for line in fixture_path("anthropic", name).read_text().splitlines() if line.strip()
    ]


async def test_auth_failure(sim):
    resp = await sim.post(req(user("hi")), {"x-api-key": "wrong", "anthropic-version": "2023-06-01"})
    assert resp.status == 401
    body = await resp.json()
    assert body["type"] == "error" and body["error"] == {
        "type": "authentication_error",
        "message": "invalid x-api-key",
    }
    assert body["request_id"].startswith("req_")
    resp = await sim.post(req(user("hi")), {"anthropic-version": "2023-06-01"})
    assert resp.status == 401
    assert (await resp.json())["error"]["message"] == "x-api-key header is required"
    assert [r.rejection.status for r in sim.state.requests] == [401, 401]


async def test_version_header_and_json_required(sim):
    resp = await sim.post(req(user("hi")), {"x-api-key": "sim-key"})
    assert resp.status == 400
    assert (await resp.json())["error"]["message"] == "anthropic-version: header is required"
    resp = await sim.post(b"{not json", HEADERS)
    assert resp.status == 400
    assert (await resp.json())["error"]["type"] == "invalid_request_error"


async def test_rejection_is_recorded_with_provider_error_body(sim):
    body = req(user("a"), assistant([tool_use("toolu_A")]), user("b"))
    resp = await sim.post(body)
    assert resp.status == 400
    payload = await resp.json()
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["message"].startswith("messages.1: `tool_use` ids were found without")
    recorded = sim.state.requests[-1]
    assert recorded.path == "/anthropic/v1/messages"
    assert recorded.body == body and recorded.headers["x-api-key"] == "sim-key"
    assert recorded.rejection.message == payload["error"]["message"]
    assert sim.state.script == type(sim.state.script)()  # a rejected request consumes no script item


async def test_stream_text_and_tool_call_like_fixture(sim):
    sim.state.push(
        Reply(
            text="I'll update the issue list for you.",
            chunk_size=10,
            tool_calls=[ToolCallSpec("updateIssueList"), ToolCallSpec("search", {"q": "bugs", "n": 3})],
        )
    )
    resp = await sim.post(req(user("update it"), stream=True))
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    events = parse_sse(await resp.read())
    assert all(name == data["type"] for name, data in events)
    types = [data["type"] for _, data in events]
    recorded = fixture_events("anthropic-tool-no-args.chunks.txt")
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert "ping" in types
    assert set(events[0][1]["message"]) == set(recorded[0]["message"])
    assert set(events[0][1]["message"]["usage"]) == set(recorded[0]["message"]["usage"])
    assert events[0][1]["message"]["model"] == MODEL
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for _, data in events:
        if data["type"] == "content_block_start":
            blocks[data["index"]] = data["content_block"]
            partial[data["index"]] = ""
        elif data["type"] == "content_block_delta":
            delta = data["delta"]
            partial[data["index"]] += delta.get("text", delta.get("partial_json", ""))
    assert [b["type"] for b in blocks.values()] == ["text", "tool_use", "tool_use"]
    assert partial[0] == "I'll update the issue list for you."
    assert all(re.fullmatch(r"toolu_01[A-Za-z0-9]{22}", blocks[i]["id"]) for i in (1, 2))
    assert blocks[1]["input"] == {} and partial[1] == ""
    no_arg_deltas = [d for _, d in events if d["type"] == "content_block_delta" and d["index"] == 1]
    assert no_arg_deltas == [
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}
    ]
    assert json.loads(partial[2]) == {"q": "bugs", "n": 3}
    delta = events[-2][1]
    assert set(delta) == set(recorded[-2]) - {"context_management"}
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] >= 1 and delta["usage"]["input_tokens"] >= 1


async def test_stream_thinking_signature_and_redacted(sim):
    sim.state.push(
        Reply(text="185", reasoning="925 divided by 5 is 185.", redacted_reasoning=True, chunk_size=7)
    )
    resp = await sim.post(req(user("925 / 5?"), stream=True, thinking=THINKING_ON))
    events = [data for _, data in parse_sse(await resp.read())]
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["thinking", "redacted_thinking", "text"]
    assert starts[0]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    thinking_events = [e for e in events if e.get("index") == 0]
    deltas = [e["delta"] for e in thinking_events if e["type"] == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "925 divided by 5 is 185."
    assert [d["type"] for d in deltas].count("signature_delta") == 1
    assert thinking_events[-2]["delta"]["type"] == "signature_delta"  # right before content_block_stop
    assert thinking_events[-1]["type"] == "content_block_stop"
    signature = thinking_events[-2]["delta"]["signature"]
    assert signature == thinking_signature(sim.state, MODEL, "925 divided by 5 is 185.")
    assert not [e for e in events if e.get("index") == 1 and e["type"] == "content_block_delta"]
    assert starts[1]["content_block"]["data"]
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


async def test_no_reasoning_unless_thinking_enabled(sim):
    sim.state.push(Reply(text="hi", reasoning="secret", redacted_reasoning=True))
    resp = await sim.post(req(user("hi")))
    body = await resp.json()
    assert [b["type"] for b in body["content"]] == ["text"]


async def test_non_stream_message_shape(sim):
    sim.state.push(Reply(text="925 ÷ 5 = 185", reasoning="925 divided by 5 = 185"))
    resp = await sim.post(req(user("925/5"), thinking=THINKING_ON))
    body = await resp.json()
    recorded = orjson.loads(fixture_path("anthropic", "anthropic-clear-thinking.1.json").read_bytes())
    assert set(body) == set(recorded) - {"context_management"}
    assert re.fullmatch(r"msg_01[A-Za-z0-9]{22}", body["id"])
    assert [b["type"] for b in body["content"]] == ["thinking", "text"]
    assert set(body["content"][0]) == set(recorded["content"][0])
    assert body["stop_reason"] == "end_turn" and body["usage"]["output_tokens"] >= 1


async def test_max_tokens_stop(sim):
    sim.state.push(Reply(text="truncat", stop="length"))
    assert (await (await sim.post(req(user("go")))).json())["stop_reason"] == "max_tokens"


async def test_tool_loop_replay_verifies_tokens(sim):
    sim.state.push(
        Reply(
            reasoning="I should look it up.",
            redacted_reasoning=True,
            tool_calls=[ToolCallSpec("lookup", {"q": "x"})],
        ),
        Reply(text="Found it."),
    )
    first = req(
        user("find x"), thinking=THINKING_ON, tools=[{"name": "lookup", "input_schema": {"type": "object"}}]
    )
    answer = await (await sim.post(first)).json()
    assert answer["stop_reason"] == "tool_use"
    call = answer["content"][-1]
    follow = copy.deepcopy(first)
    follow["messages"] += [assistant(answer["content"]), user([tool_result(call["id"], "x is 42")])]
    resp = await sim.post(follow)
    assert resp.status == 200, await resp.text()
    assert sim.state.verified_tokens == 2
    # without interleaved thinking Claude does not think again after tool results
    assert [b["type"] for b in (await resp.json())["content"]] == ["text"]

    edited = copy.deepcopy(follow)
    edited["messages"][1]["content"][0]["thinking"] = "I should make it up."
    resp = await sim.post(edited)
    assert resp.status == 400
    assert (await resp.json())["error"][
        "message"
    ] == "messages.1.content.0: Invalid `signature` in `thinking` block"
    resp = await sim.post({**follow, "model": "claude-opus-4-1"})
    assert resp.status == 400
    assert sim.state.verified_tokens == 2


async def test_interleaved_beta_thinks_after_tool_results(sim):
    first_call = assistant([thinking(sim.state, "plan"), tool_use("toolu_A")])
    body = req(user("a"), first_call, user([tool_result("toolu_A")]), thinking=THINKING_ON)
    sim.state.push(Reply(text="done", reasoning="the result says 42"))
    resp = await sim.post(body, {**HEADERS, "anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert [b["type"] for b in (await resp.json())["content"]] == ["thinking", "text"]


async def test_fault_status_with_retry_after(sim):
    sim.state.push(Fault(status=429, retry_after=3), Fault(status=529), Fault(status=500, message="boom"))
    resp = await sim.post(req(user("hi")))
    assert resp.status == 429 and resp.headers["retry-after"] == "3"
    body = await resp.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error" and body["request_id"]
    resp = await sim.post(req(user("hi")))
    assert resp.status == 529
    assert (await resp.json())["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    resp = await sim.post(req(user("hi")))
    assert resp.status == 500 and (await resp.json())["error"] == {"type": "api_error", "message": "boom"}


async def test_fault_delay_then_reply(sim):
    sim.state.push(Fault(delay=0.3, reply=Reply(text="late")))
    started = time.monotonic()
    resp = await sim.post(req(user("hi")))
    assert time.monotonic() - started >= 0.3
    assert (await resp.json())["content"] == [{"type": "text", "text": "late"}]


async def test_fault_reset_before_headers(sim):
    sim.state.push(Fault(reset_before_headers=True))
    with pytest.raises(aiohttp.ClientError):
        await sim.post(req(user("hi")))
    assert len(sim.state.requests) == 1


async def test_mid_stream_error_after_n_events(sim):
    sim.state.push(Fault(after_events=3, reply=Reply(text="a long answer that is cut", chunk_size=4)))
    resp = await sim.post(req(user("hi"), stream=True))
    events = parse_sse(await resp.read())
    assert len(events) == 4
    assert [name for name, _ in events[:3]] == ["message_start", "content_block_start", "ping"]
    assert events[3] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )


async def test_mid_stream_reset_after_n_events(sim):
    sim.state.push(Fault(after_events=2, mid_stream="reset", reply=Reply(text="x" * 200, chunk_size=5)))
    resp = await sim.post(req(user("hi"), stream=True))
    received = b""
    with pytest.raises(aiohttp.ClientError):
        async for chunk in resp.content.iter_any():
            received += chunk
    assert received.count(b"event: ") == 2


async def test_non_stream_mid_stream_fault_answers_overloaded(sim):
    sim.state.push(Fault(after_events=1))
    resp = await sim.post(req(user("hi")))
    assert resp.status == 529


async def test_requests_recorded_in_order(sim):
    for n in range(3):
        await (await sim.post(req(user(f"q{n}")))).read()
    assert [r.body["messages"][0]["content"] for r in sim.state.requests] == ["q0", "q1", "q2"]
    assert all(r.rejection is None for r in sim.state.requests)
    await asyncio.sleep(0)
    assert sim.state.open_streams == 0
