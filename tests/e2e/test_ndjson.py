"""The NDJSON event stream end to end: a UI's streamed tool loop on every provider family, through
the strict simulators, with the history sent back as the README documents."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from gateway.continuity.codec import decode_turn
from gateway.continuity.recorder import carries_continuity
from gateway.continuity.restore import message_keys
from gateway.demo import TOOLS
from gateway.ingress.chat.codec import CODEC
from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec
from gateway.transcript.model import Block, ToolCall, replace
from tests.e2e.ndjson_client import Running, chat_history, first_seen, fold, ndjson_gateway, post_ndjson
from tests.e2e.scenarios import KIND, NAMES, SIGNING
from tests.routing.sim_stack import eventually

START = [
    {"role": "system", "content": "You are a weather assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
]
THINK_1 = "The user wants the weather; I will look it up."
TEXT_1 = "Let me check the weather in Paris."
THINK_2 = "Sunny and 21C: a short answer will do."
TEXT_2 = "It is sunny in Paris, 21C."
# Chat Completions returns no reasoning text: an OpenAI chat model's turns have no thinking block
NO_THINKING = {"openai_chat"}
# Gemini 3 ends a turn without calls with an empty text part that carries the thought signature
SIGNED_EMPTY_TEXT = {"gemini"}


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub() as hub:
        yield hub


def no_rejections(hub: SimulatorHub) -> None:
    rejected = {kind: [r.message for r in s.rejections] for kind, s in hub.states.items() if s.rejections}
    assert rejected == {}


def comparable(blocks: tuple[Block, ...] | list[Block]) -> list[Block]:
    """Blocks with tool arguments as parsed JSON: a UI re-serializes them in its own spacing."""
    return [
        replace(b, arguments=json.dumps(json.loads(b.arguments), sort_keys=True))
        if type(b) is ToolCall
        else b
        for b in blocks
    ]


async def assert_chat_replays_the_recorded_turn(
    gateway: Running, model: str, history: list[dict[str, Any]], session: str
) -> None:
    """The history the UI built from the NDJSON lines, decoded by the chat ingress, is exactly the
    turn the gateway's assembler recorded for the answer (text, reasoning, calls, continuity)."""
    inbound = CODEC.decode({"model": model, "messages": history}, {}, gateway.state.sealer)
    assert inbound.ignored_tokens == 0
    key = message_keys(inbound.request, session)[-1]
    assert key is not None
    record = gateway.state.recorder.pending([key]).get(key)
    if record is None:
        (record,) = await gateway.state.store.get_many([key])
    replayed = inbound.request.messages[-1].blocks
    if not carries_continuity(list(replayed)):
        # a turn with nothing a client cannot carry itself is not recorded (OpenAI chat text)
        assert record is None
        return
    assert record is not None, "the gateway recorded the answer"
    assert comparable(replayed) == comparable(decode_turn(record))


def check_stream(streamed, kinds: list[str], finish: str) -> list[dict[str, Any]]:
    """The common shape of a complete answer; returns the UI's blocks."""
    assert streamed.status == 200
    assert streamed.headers["Content-Type"] == "application/x-ndjson"
    assert streamed.raw.endswith(b"\n") and b"\n\n" not in streamed.raw
    lines = streamed.lines
    blocks = fold(lines)
    assert [b["type"] for b in blocks] == kinds
    assert first_seen(lines) == list(range(len(blocks))), "lines come in block start order"
    *body, end = lines
    assert end["type"] == "end" and end["finish_reason"] == finish
    usage = [line for line in body if line["type"] == "usage"]
    assert usage, "usage is reported before the end"
    assert end["usage"] == {k: v for k, v in usage[-1].items() if k != "type"}
    assert end["usage"]["input_tokens"] > 0 and end["usage"]["output_tokens"] > 0
    assert not [line for line in lines if line["type"] == "error"]
    return blocks


@pytest.mark.parametrize("name", NAMES, ids=[KIND[n] for n in NAMES])
async def test_a_streamed_tool_loop_in_ndjson_on_every_family(hub, name):
    """thinking -> text -> tool_call; the client runs the tool and sends the turn back (chat
    format, tokens from the NDJSON lines) to a fresh gateway with an empty store: thinking -> text.
    The continuity tokens the UI kept are all the second gateway has, and the provider accepts
    them."""
    kind = KIND[name]
    state = hub.states[kind]
    state.push(
        Reply(reasoning=THINK_1, text=TEXT_1, tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]),
        Reply(reasoning=THINK_2, text=TEXT_2),
    )
    thinking = [] if kind in NO_THINKING else ["thinking"]
    async with aiohttp.ClientSession() as session:
        async with ndjson_gateway(hub) as first:
            request = {"model": name, "stream": True, "tools": TOOLS, "messages": list(START)}
            one = await post_ndjson(session, first.url, request)
            blocks = check_stream(one, [*thinking, "text", "tool_call"], "tool_calls")
            history = [*START, chat_history(blocks)]
            await assert_chat_replays_the_recorded_turn(first, name, history, one.headers["X-Session-Id"])

        if thinking:
            assert blocks[0]["text"] == THINK_1
        assert blocks[-2]["text"] == TEXT_1
        call = blocks[-1]
        assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})
        if kind in SIGNING:  # the issuer's token rides on the block it signed
            assert all("signature" in b for b in blocks if b["type"] != "text")
        history.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21C"})

        async with ndjson_gateway(hub) as second:  # same continuity secret, empty store
            two = await post_ndjson(session, second.url, {**request, "messages": history})
            tail = ["text"] if kind in SIGNED_EMPTY_TEXT else []
            blocks_2 = check_stream(two, [*thinking, "text", *tail], "end_turn")
            await assert_chat_replays_the_recorded_turn(
                second, name, [*history, chat_history(blocks_2)], two.headers["X-Session-Id"]
            )
    if thinking:
        assert blocks_2[0]["text"] == THINK_2
    if tail:
        *blocks_2, signed = blocks_2
        assert signed["text"] == "" and signed["signature"]
    assert blocks_2[-1]["text"] == TEXT_2
    assert "continuity_restored" not in two.headers.get("X-Gateway-Repairs", "")
    no_rejections(hub)
    # the replayed tokens came from the UI's history alone, and the issuer verified them
    assert state.verified_tokens == (1 if kind in SIGNING else 0)
    sent = state.requests[-1].body
    assert "Paris" in json.dumps(sent) and "sunny, 21C" in json.dumps(sent)


async def test_the_ndjson_stream_is_written_as_the_upstream_produces_it():
    """The first text line reaches the client while the upstream stream is still open."""
    async with SimulatorHub(handler_cancellation=True) as hub:
        await _first_line_while_the_upstream_streams(hub)


async def _first_line_while_the_upstream_streams(hub: SimulatorHub) -> None:
    state = hub.states["openai_chat"]
    story = "Once upon a time " * 40
    state.push(Fault(after_events=6, mid_stream="stall", stall_seconds=60.0, reply=Reply(text=story)))
    body = {"model": "openai-chat", "stream": True, "messages": list(START)}
    async with ndjson_gateway(hub) as gw, aiohttp.ClientSession() as session:
        async with session.post(
            f"{gw.url}/v1/chat/completions", json=body, headers={"Accept": "application/x-ndjson"}
        ) as resp:
            assert resp.headers["Content-Type"] == "application/x-ndjson"
            line = json.loads(await resp.content.readline())
            assert line == {"type": "text", "index": 0, "text": story[: len(line["text"])]}
            assert state.open_streams == 1, "the upstream has not finished: the line was not held back"
    await eventually(lambda: state.open_streams == 0)  # the client left: the upstream was closed


async def test_a_failure_after_the_commit_point_ends_with_an_error_line(hub):
    state = hub.states["anthropic"]
    state.push(
        Fault(after_events=5, mid_stream="error", error_type="overloaded_error", reply=Reply(text="x" * 200))
    )
    body = {"model": "claude", "stream": True, "messages": list(START)}
    async with ndjson_gateway(hub) as gw, aiohttp.ClientSession() as session:
        streamed = await post_ndjson(session, gw.url, body)
    assert streamed.status == 200
    *before, last = streamed.lines
    assert last["type"] == "error"
    assert last["error"]["type"] == "overloaded" and last["error"]["message"]
    assert before and all(
        line["type"] in ("text", "thinking", "thinking_signature", "usage") for line in before
    )
    assert not [line for line in streamed.lines if line["type"] == "end"]


@pytest.mark.parametrize(
    ("model", "fault", "status"),
    [
        ("no-such-model", None, 404),
        (
            "openai-chat",
            Fault(status=400, message="Invalid 'messages': something the provider refused."),
            400,
        ),
    ],
    ids=["unknown-model", "upstream-400"],
)
async def test_errors_before_the_commit_point_keep_the_dialect_envelope(hub, model, fault, status):
    if fault is not None:
        hub.states["openai_chat"].push(fault)
    body = {"model": model, "stream": True, "messages": list(START)}
    async with ndjson_gateway(hub) as gw, aiohttp.ClientSession() as session:
        async with session.post(
            f"{gw.url}/v1/chat/completions", json=body, headers={"Accept": "application/x-ndjson"}
        ) as resp:
            assert resp.status == status
            assert resp.content_type == "application/json"
            error = (await resp.json())["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]


@pytest.mark.parametrize(
    ("accept", "stream", "content_type"),
    [
        ("application/x-ndjson", False, "application/json"),  # NDJSON is a stream: ask for one
        ("text/event-stream", True, "text/event-stream"),
        ("application/json", True, "text/event-stream"),
        ("application/x-ndjson;q=0.5, text/event-stream", True, "text/event-stream"),
    ],
)
async def test_other_requests_keep_their_dialect(hub, accept, stream, content_type):
    body = {"model": "openai-chat", "stream": stream, "messages": list(START)}
    async with ndjson_gateway(hub) as gw, aiohttp.ClientSession() as session:
        async with session.post(
            f"{gw.url}/v1/chat/completions", json=body, headers={"Accept": accept}
        ) as resp:
            assert resp.status == 200
            assert resp.content_type == content_type
            await resp.read()
