"""Issuer affinity: the open tool loop's issuer goes first while it can take traffic."""

from __future__ import annotations

import pytest

from gateway.routing.affinity import open_loop, prefer_issuer
from gateway.routing.engine import AllTargetsFailed
from gateway.simulators.base import Fault, Reply
from gateway.transcript.model import (
    NATIVE_ID,
    Continuity,
    Message,
    Reasoning,
    Request,
    Role,
    Text,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.target import Target
from tests.routing.sim_stack import FakeTime, ask, collect, engine_for, group

CLAUDE = Target("claude", "anthropic", "claude-sonnet-4-5", "http://x", scope="claude")
CHAT = Target("openai-chat", "openai_chat", "gpt-4.1", "http://y", scope="openai-chat")
GEM = Target("gemini", "gemini", "gemini-3-pro-preview", "http://z", scope="gemini")
USER = Message(Role.USER, (Text("Weather in Paris?"),))


def loop_request(issuer: Target | None, *, closed: bool = False, meta_on: str = "call") -> Request:
    meta = issuer.continuity({NATIVE_ID: "toolu_01Native"}) if issuer is not None else None
    if meta_on == "call":
        assistant = Message(Role.ASSISTANT, (ToolCall("call_a1", "get_weather", '{"city": "Paris"}', meta),))
    else:
        assistant = Message(
            Role.ASSISTANT,
            (Reasoning("thinking", meta), ToolCall("call_a1", "get_weather", '{"city": "Paris"}')),
        )
    messages = [USER, assistant, Message(Role.TOOL, (ToolResult("call_a1", "sunny"),))]
    if closed:
        messages.append(Message(Role.USER, (Text("And Tokyo?"),)))
    return Request("g", tuple(messages), tools=(ToolSpec("get_weather"),))


@pytest.mark.parametrize("meta_on", ["call", "reasoning"])
def test_the_issuer_of_the_open_loop_goes_first(meta_on):
    assert prefer_issuer((CHAT, GEM, CLAUDE), loop_request(CLAUDE, meta_on=meta_on)) == (CLAUDE, CHAT, GEM)


def test_no_open_loop_or_no_known_issuer_keeps_the_order():
    order = (CHAT, CLAUDE)
    assert prefer_issuer(order, loop_request(CLAUDE, closed=True)) == order
    assert prefer_issuer(order, loop_request(None)) == order
    assert prefer_issuer(order, Request("g", (USER,))) == order
    assert open_loop((USER,)) == ()


def test_a_token_of_another_model_or_an_unknown_issuer_claims_nothing():
    other_model = Continuity("claude", "claude", "anthropic", "claude-opus-4-1", {})
    wildcard = Continuity("claude", "*", "anthropic", "*", {})
    for meta in (other_model, wildcard):
        request = loop_request(None)
        call = ToolCall("call_a1", "get_weather", "{}", meta)
        messages = (request.messages[0], Message(Role.ASSISTANT, (call,)), request.messages[2])
        assert prefer_issuer((CHAT, CLAUDE), Request("g", messages)) == (CHAT, CLAUDE)


def test_the_earliest_token_of_the_loop_decides():
    first = Message(Role.ASSISTANT, (ToolCall("c1", "f", "{}", GEM.continuity({NATIVE_ID: "x"})),))
    second = Message(Role.ASSISTANT, (ToolCall("c2", "f", "{}", CLAUDE.continuity({NATIVE_ID: "y"})),))
    result1 = Message(Role.TOOL, (ToolResult("c1", "r"),))
    result2 = Message(Role.TOOL, (ToolResult("c2", "r"),))
    request = Request("g", (USER, first, result1, second, result2))
    assert prefer_issuer((CHAT, CLAUDE, GEM), request) == (GEM, CHAT, CLAUDE)


def test_prefer_issuer_does_not_mutate_its_input():
    order = (CHAT, CLAUDE)
    request = loop_request(CLAUDE)
    before = (order, request)
    prefer_issuer(order, request)
    assert (order, request) == before


async def test_the_engine_keeps_an_open_loop_on_its_issuer_while_it_is_healthy(hub):
    fake = FakeTime()
    models = {
        "sticky": group("openai-chat", "claude", strategy="round_robin", affinity="issuer"),
        "claude-only": group("claude", retry={"max_retries": 0}),
    }
    async with engine_for(hub, models, fake) as engine:
        claude = engine.router.groups()["sticky"][1]
        request = loop_request(claude)
        served = []
        for _ in range(4):
            answer = await engine.open(request, engine.router.plan("sticky"))
            await collect(answer)
            served.append(answer.target.provider)
        assert served == ["claude"] * 4, "round robin would have alternated"
        # a fresh turn is not held: the strategy decides again
        fresh = []
        for _ in range(2):
            answer = await engine.open(ask("sticky"), engine.router.plan("sticky"))
            await collect(answer)
            fresh.append(answer.target.provider)
        assert sorted(fresh) == ["claude", "openai-chat"]
        # the issuer cools down (its health is shared by every group using it): the loop moves on
        hub.states["anthropic"].push(*[Fault(status=529)] * 3)
        for _ in range(3):
            with pytest.raises(AllTargetsFailed):
                await engine.open(ask("claude-only"), engine.router.plan("claude-only"))
        answer = await engine.open(request, engine.router.plan("sticky"))
        await collect(answer)
        assert [a.provider for a in answer.attempts] == ["openai-chat"]
    assert hub.states["anthropic"].rejections == [] and hub.states["openai_chat"].rejections == []


async def test_without_affinity_the_strategy_decides(hub):
    models = {"rr": group("openai-chat", "claude", strategy="round_robin")}
    hub.states["anthropic"].push(Reply(text="a"), Reply(text="b"))
    async with engine_for(hub, models) as engine:
        claude = engine.router.groups()["rr"][1]
        served = []
        for _ in range(2):
            answer = await engine.open(loop_request(claude), engine.router.plan("rr"))
            await collect(answer)
            served.append(answer.target.provider)
    assert served == ["openai-chat", "claude"]
