"""The decode memo through the whole gateway, over loopback HTTP to the strict simulators: an agent
session that switches family every turn sends every provider the same bytes whether the gateway
decodes each message afresh or reuses what it decoded on the previous turns (restore, repair and
projection run after it either way)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, FAMILIES, TOOLS, demo_config
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.memo_chain import LONG_TRANSCRIPT
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from gateway.state import GatewayState

ANTHROPIC_MODELS = ("claude", "gemini", "openai-chat", "deepseek")


class Gateway:
    def __init__(self, hub: SimulatorHub, app: web.Application, url: str) -> None:
        self.hub = hub
        self.app = app
        self.url = url

    @property
    def state(self) -> GatewayState:
        return self.app[GatewayState.KEY]


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    async with SimulatorHub() as hub:
        config = config_from_dict(demo_config(hub), source="<test>")
        app = create_app(config, {DEMO_KEY_ENV: hub.states["anthropic"].api_key})
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, config.server.host, config.server.port)
        await site.start()
        try:
            yield Gateway(hub, app, f"http://{config.server.host}:{config.server.port}")
        finally:
            await runner.cleanup()


def _script(gateway: Gateway, kind: str, turn: int) -> None:
    """Two identical answers: the one without the memo, then the one with it."""
    for _ in range(2):
        gateway.hub.states[kind].push(
            Reply(
                reasoning=f"Turn {turn}: another city.",
                text=f"Checking city {turn}.",
                tool_calls=[ToolCallSpec("get_weather", {"city": f"City{turn}"})],
            )
        )


async def _twice(
    gateway: Gateway, http: aiohttp.ClientSession, path: str, body: dict[str, Any], kind: str
) -> tuple[Any, Any]:
    """The upstream body of `body` sent once without the memo and once with it (warm: it has seen
    every earlier turn), and the answer of the second."""
    memo = gateway.state.memo
    sent = []
    answer: Any = None
    for current in (DecodeMemo(0), memo):
        gateway.state.memo = current
        before = len(gateway.hub.states[kind].requests)
        async with http.post(
            gateway.url + path,
            data=orjson.dumps(body),
            headers={"X-Session-Id": "memo-e2e", "Content-Type": "application/json"},
        ) as resp:
            answer = await resp.json()
            assert resp.status == 200, answer
        recorded = gateway.hub.states[kind].requests[before:]
        assert len(recorded) == 1 and recorded[0].rejection is None
        sent.append(recorded[0].body)
    gateway.state.memo = memo
    assert sent[0] == sent[1]
    return sent[1], answer


async def test_chat_session_across_every_family_sends_the_same_bytes(gateway):
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Weather in many cities, one at a time."},
    ]
    async with aiohttp.ClientSession() as http:
        for turn in range(2 * len(FAMILIES)):
            name, kind, _, _ = FAMILIES[turn % len(FAMILIES)]
            _script(gateway, kind, turn)
            body = {"model": name, "messages": messages, "tools": TOOLS}
            _, answer = await _twice(gateway, http, "/v1/chat/completions", body, kind)
            message = {k: v for k, v in answer["choices"][0]["message"].items() if v is not None}
            call = message["tool_calls"][0]
            messages = [*messages, message, {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
    memo = gateway.state.memo
    # the last answer and its result were never sent; every message sent is kept (on probation
    # when it was new, protected once it came back: all but the two new ones of the last turn),
    # and decoded once, when it was new, but for the first turn's two: its opening was only
    # remembered (evidence of reuse comes with the second turn, which decoded them again)
    sent = len(messages) - 2
    assert len(memo) == sent and memo.protected == sent - 2
    assert memo.misses == sent + 2


async def test_messages_session_across_families_sends_the_same_bytes(gateway):
    tools = [
        {"name": t["function"]["name"], "description": "d", "input_schema": t["function"]["parameters"]}
        for t in TOOLS
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in many cities, one at a time."}]
    kinds = {name: kind for name, kind, _, _ in FAMILIES}
    async with aiohttp.ClientSession() as http:
        for turn in range(2 * len(ANTHROPIC_MODELS)):
            name = ANTHROPIC_MODELS[turn % len(ANTHROPIC_MODELS)]
            _script(gateway, kinds[name], turn)
            body = {"model": name, "max_tokens": 1024, "messages": messages, "tools": tools}
            _, answer = await _twice(gateway, http, "/v1/messages", body, kinds[name])
            call = next(b for b in answer["content"] if b["type"] == "tool_use")
            messages = [
                *messages,
                {"role": "assistant", "content": answer["content"]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "sunny"}],
                },
            ]
    assert gateway.state.memo.hits > 0


Turn = Callable[[str, list[dict[str, Any]]], tuple[str, dict[str, Any]]]


async def _across_families(
    gateway: Gateway, items: list[dict[str, Any]], turn: Turn, went_on: Callable[[Any], list[dict[str, Any]]]
) -> None:
    """An agent session switching family every turn: `turn(model, items)` is the request's path
    and body, `went_on(answer)` what the client adds to its list (sent through `_twice`)."""
    async with aiohttp.ClientSession() as http:
        for n in range(2 * len(FAMILIES)):
            name, kind, _, _ = FAMILIES[n % len(FAMILIES)]
            _script(gateway, kind, n)
            path, body = turn(name, items)
            _, answer = await _twice(gateway, http, path, body, kind)
            items = [*items, *went_on(answer)]
    assert gateway.state.memo.hits > 0


_CODEX_TOOLS = [
    {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
    for t in TOOLS
]


def _codex_turn(model: str, items: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Codex's request: store false, encrypted reasoning included (the model first, as Codex
    writes it: switching model moves the list)."""
    body = {
        "model": model,
        "input": items,
        "tools": _CODEX_TOOLS,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    return "/v1/responses", body


def _codex_went_on(answer: Any) -> list[dict[str, Any]]:
    """Each answer's output items sent back as they came, then the call's output."""
    call = next(item for item in answer["output"] if item["type"] == "function_call")
    return [
        *answer["output"],
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
    ]


def _codex_opening(turns: int) -> list[dict[str, Any]]:
    said = [("developer", "Be a travel agent.")]
    for n in range(turns):
        said += [("user", f"Weather in city {n}?"), ("assistant", f"Sunny in city {n}.")]
    said.append(("user", "Weather, city by city."))
    return [
        {
            "type": "message",
            "role": role,
            "content": [{"type": "output_text" if role == "assistant" else "input_text", "text": text}],
        }
        for role, text in said
    ]


async def test_responses_session_as_codex_sends_it_across_families_sends_the_same_bytes(gateway):
    """Codex's turns: read through the memo, resumed after the items the last turn read
    (gateway/ingress/resumed.py)."""
    await _across_families(gateway, _codex_opening(0), _codex_turn, _codex_went_on)


async def test_a_long_codex_session_switching_model_goes_on_from_its_held_body(gateway, monkeypatch):
    """A long Codex session (held whole: gateway/ingress/memo_chain.py) switching model every
    turn: the list moves in the body, is found by its key, and every turn after the first goes
    on from the last one's body (no item read by its bytes: `DecodeMemo.split`), sending the
    same bytes as without the memo."""
    memo = gateway.state.memo
    split = memo.split
    splits: list[int] = []
    monkeypatch.setattr(memo, "split", lambda *a, **k: splits.append(1) or split(*a, **k))
    opening = _codex_opening(LONG_TRANSCRIPT // 2)
    await _across_families(gateway, opening, _codex_turn, _codex_went_on)
    assert splits == []
    assert memo.hits >= (2 * len(FAMILIES) - 1) * len(opening)


async def test_gemini_session_as_gemini_cli_sends_it_across_families_sends_the_same_bytes(gateway):
    """Gemini CLI's turns (the contents, each answer's content sent back as it came, then the
    call's response): read through the memo, resumed after the contents the last turn read."""
    declarations = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS]

    def turn(model: str, contents: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        body = {
            "contents": contents,
            "systemInstruction": {"parts": [{"text": "Be a travel agent."}]},
            "tools": [{"functionDeclarations": declarations}],
        }
        return f"/v1beta/models/{model}:generateContent", body

    def went_on(answer: Any) -> list[dict[str, Any]]:
        content = answer["candidates"][0]["content"]
        call = next(p["functionCall"] for p in content["parts"] if "functionCall" in p)
        response = {"name": call["name"], "id": call.get("id"), "response": {"output": "sunny"}}
        return [content, {"role": "user", "parts": [{"functionResponse": response}]}]

    opening = [{"role": "user", "parts": [{"text": "Weather, city by city."}]}]
    await _across_families(gateway, opening, turn, went_on)


async def test_a_long_first_sight_is_bounded_after_its_request_went_upstream(gateway, monkeypatch):
    """A long transcript's first sight is held for its next turn; when only a scan of its bytes
    for \\u escapes shows it fits the memo's budget, that scan runs once the request went upstream
    (the exchange's bookkeeping: `DecodeMemo.settle`), not on its way there; the next turn goes on
    from the held body all the same."""
    from bench.workloads import agent_messages
    from gateway.ingress import memo_chain
    from gateway.ingress.budget import value_bound
    from gateway.ingress.memo import SHORT_BODY
    from gateway.ingress.memo_items import _FirstSight
    from gateway.ingress.memo_size import body_turn_size

    name, kind, _, _ = next(f for f in FAMILIES if f[1] == "openai_chat")
    messages = agent_messages(memo_chain.LONG_TRANSCRIPT + 6, "settle")
    raw = orjson.dumps({"model": name, "messages": messages})
    count = len(messages)

    def bound(narrow_text: bool) -> int:
        return body_turn_size(raw, value_bound(raw, 0, len(raw)), count, 0, narrow_text=narrow_text)

    max_bytes = bound(False)  # a budget the body fits only once scanned narrow
    while DecodeMemo(max_bytes)._items_max >= bound(False):
        max_bytes -= max_bytes // 64
    memo = gateway.state.memo = DecodeMemo(max_bytes, min_bytes=SHORT_BODY)
    assert bound(True) <= memo._items_max
    upstream = gateway.hub.states[kind].requests
    scanned: list[int] = []
    scan = memo_chain.narrow
    monkeypatch.setattr(memo_chain, "narrow", lambda body: scanned.append(len(upstream)) or scan(body))
    async with aiohttp.ClientSession() as http:
        for turn in range(2):
            gateway.hub.states[kind].push(Reply(text=f"Answer {turn}."))
            headers = {"Content-Type": "application/json"}
            async with http.post(gateway.url + "/v1/chat/completions", data=raw, headers=headers) as resp:
                answer = await resp.json()
                assert resp.status == 200, answer
            if turn == 0:
                assert scanned == [1]  # after the request reached the provider
                held = [v for v in memo._probation.values() if type(v) is _FirstSight]
                assert memo._unsized is None and len(held) == 1 and held[0].narrow is True
            messages = [*messages, answer["choices"][0]["message"], {"role": "user", "content": "Go on."}]
            raw = orjson.dumps({"model": name, "messages": messages})
    assert memo.hits == count  # the second turn found every held item


async def test_conversations_the_passes_let_go_are_freed_after_the_request_went_upstream(
    gateway, monkeypatch
):
    """The resuming passes hold long conversations' states for their next turns; one that a new
    conversation pushes out is freed in the exchange's bookkeeping, once the request reached the
    provider (`resume.release_retired`), not on its way there."""
    from bench.workloads import agent_messages
    from gateway import books
    from gateway.repair import tool_ids
    from gateway.transcript import resume

    name, kind, _, _ = next(f for f in FAMILIES if f[1] == "openai_chat")
    # room for one conversation in the id projection's held states: the second pushes the first out
    monkeypatch.setattr(tool_ids._SO_FAR._held, "_limit", LONG_TRANSCRIPT + 10)
    upstream = gateway.hub.states[kind].requests
    releases: list[tuple[int, int]] = []  # (requests the provider had, values retired) at each release
    release = resume.release_retired
    monkeypatch.setattr(
        books,
        "release_retired",
        lambda: releases.append((len(upstream), len(resume._retired))) or release(),
    )
    resume.release_retired()
    async with aiohttp.ClientSession() as http:
        for conversation in range(2):
            gateway.hub.states[kind].push(Reply(text=f"Answer {conversation}."))
            messages = agent_messages(LONG_TRANSCRIPT + 6, f"retire {conversation}")
            raw = orjson.dumps({"model": name, "messages": messages})
            headers = {"Content-Type": "application/json"}
            async with http.post(gateway.url + "/v1/chat/completions", data=raw, headers=headers) as resp:
                answer = await resp.json()
                assert resp.status == 200, answer
    assert len(releases) == 2
    # the second conversation pushed the first out: retired on the way, freed after the provider
    # had the request
    assert releases[1][0] == 2 and releases[1][1] > 0
    assert resume._retired == []
