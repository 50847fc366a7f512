"""Session affinity: a conversation stays on the target that served its previous turn while that
target is healthy; round robin spreads sessions, not turns; breaks are counted by reason."""

from __future__ import annotations

import asyncio
from collections import Counter

import openai

from gateway.routing.sessions import SessionMemory
from gateway.simulators.base import Fault
from gateway.transcript.target import Target
from tests.routing.sim_stack import Stack, gateway_stack, group

TRIO = ("openai-chat", "mistral", "deepseek")
KINDS = {"openai-chat": "openai_chat", "mistral": "mistral", "deepseek": "deepseek"}
CONVERSATIONS = 100
TURNS = 5


async def turn(client: openai.AsyncOpenAI, session: str, history: list[dict]) -> str:
    raw = await client.chat.completions.with_raw_response.create(
        model="rr", messages=history, extra_headers={"X-Session-Id": session}
    )
    completion = raw.parse()
    history.append({"role": "assistant", "content": completion.choices[0].message.content})
    return raw.headers["x-gateway-provider"]


async def conversation(
    client: openai.AsyncOpenAI, session: str, turns: range, history: list[dict], served: list[str]
) -> None:
    for n in turns:
        history.append({"role": "user", "content": f"Question {n} of {session}?"})
        served.append(await turn(client, session, history))


def moves(served: list[str]) -> int:
    return sum(a != b for a, b in zip(served, served[1:], strict=False))


async def run_all(stack: Stack, turns: range, histories: dict, served: dict) -> None:
    client = stack.client()
    await asyncio.gather(*(conversation(client, s, turns, histories[s], served[s]) for s in histories))


async def test_conversations_stay_on_their_target_and_move_once_when_it_fails(hub):
    models = {"rr": group(*TRIO, strategy="round_robin", affinity="session")}
    async with gateway_stack(hub, models) as stack:
        sessions = [f"conv-{n:03d}" for n in range(CONVERSATIONS)]
        histories: dict[str, list[dict]] = {s: [] for s in sessions}
        served: dict[str, list[str]] = {s: [] for s in sessions}
        await run_all(stack, range(2), histories, served)
        # healthy: every conversation kept its first target, and round robin spread sessions
        assert all(moves(served[s]) == 0 for s in sessions)
        spread = Counter(served[s][0] for s in sessions)
        assert set(spread) == set(TRIO) and min(spread.values()) >= CONVERSATIONS // 3 - 1

        faulted = "mistral"
        hub.states[KINDS[faulted]].fail_randomly(1.0, Fault(status=503))
        await run_all(stack, range(2, TURNS), histories, served)
        for s in sessions:
            assert len(served[s]) == TURNS
            if served[s][0] == faulted:
                assert moves(served[s]) == 1 and faulted not in served[s][2:]
            else:
                assert moves(served[s]) == 0
        breaks = sum(
            stack.sample("gateway_affinity_breaks_total", model="rr", reason=reason)
            for reason in ("unhealthy", "cooldown", "capability")
        )
        assert breaks == spread[faulted]
        assert stack.sample("gateway_affinity_breaks_total", model="rr", reason="capability") == 0


async def test_without_session_affinity_round_robin_moves_conversations_every_turn(hub):
    models = {"rr": group(*TRIO, strategy="round_robin")}
    async with gateway_stack(hub, models) as stack:
        served: list[str] = []
        await conversation(stack.client(), "solo", range(3), [], served)
    assert moves(served) == 2


async def test_a_target_that_cannot_serve_the_request_breaks_affinity_for_capability(hub):
    # Gemini 2.5 cannot combine function calling with a JSON response format: that turn of the
    # session goes elsewhere, and the break is counted as a capability one
    models = {
        "mix": {
            "targets": [
                {"provider": "gemini", "model": "gemini-2.5-flash"},
                {"provider": "openai-chat", "model": "gpt-4.1"},
            ],
            "affinity": "session",
        }
    }
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    async with gateway_stack(hub, models) as stack:
        client = stack.client()
        history: list[dict] = [{"role": "user", "content": "Hi"}]
        first = await client.chat.completions.with_raw_response.create(
            model="mix", messages=history, extra_headers={"X-Session-Id": "cap"}
        )
        assert first.headers["x-gateway-provider"] == "gemini"
        history += [
            {"role": "assistant", "content": first.parse().choices[0].message.content},
            {"role": "user", "content": "Now as JSON"},
        ]
        second = await client.chat.completions.with_raw_response.create(
            model="mix",
            messages=history,
            tools=tools,
            response_format={"type": "json_schema", "json_schema": {"name": "A", "schema": schema}},
            extra_headers={"X-Session-Id": "cap"},
        )
        assert second.headers["x-gateway-provider"] == "openai-chat"
        assert stack.sample("gateway_affinity_breaks_total", model="mix", reason="capability") == 1
        assert hub.states["gemini"].requests[-1].body["contents"][0]["parts"] == [{"text": "Hi"}]


def test_the_session_memory_is_bounded_and_forgets_after_its_ttl():
    now = [0.0]
    memory = SessionMemory(maxsize=2, ttl=10.0, clock=lambda: now[0])
    a = Target("a", "openai_chat", "m", "http://a")
    b = Target("b", "mistral", "m", "http://b")
    memory.served("g", "s1", a)
    memory.served("g", "s2", b)
    memory.served("g", "s3", a)
    assert len(memory) == 2 and memory.target("g", "s1", (a, b)) is None
    assert memory.target("g", "s3", (a, b)) is a and memory.target("g", "s3", (b,)) is None
    now[0] = 11.0
    assert memory.target("g", "s2", (a, b)) is None


async def test_another_replica_finds_the_sessions_target_from_the_transcripts_last_issuer(hub):
    # a fresh engine (another replica: empty memory) reads where the previous turn was served
    # from the continuity data of the conversation's latest assistant turn
    from gateway.transcript.model import NATIVE_ID, Message, Request, Role, Text, ToolCall, ToolResult
    from tests.routing.sim_stack import engine_for

    models = {"rr": group(*TRIO, strategy="round_robin", affinity="session")}
    async with engine_for(hub, models) as engine:
        plan = engine.router.plan("rr")
        issuer = next(t for t in plan.targets if t.provider == "deepseek")
        call = ToolCall("call_a", "lookup", "{}", issuer.continuity({NATIVE_ID: "call_00_x"}))
        request = Request(
            "rr",
            (
                Message(Role.USER, (Text("q"),)),
                Message(Role.ASSISTANT, (call,)),
                Message(Role.TOOL, (ToolResult("call_a", "r"),)),
                Message(Role.ASSISTANT, (Text("done"),)),
                Message(Role.USER, (Text("next"),)),
            ),
        )
        for _ in range(3):  # whatever the rotation says
            order, home, moved = engine._session_order(request, engine.router.plan("rr"), "s")
            assert order[0] is issuer and home is issuer and moved is None
