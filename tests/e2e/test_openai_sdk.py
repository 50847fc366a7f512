"""The official openai SDK, pointed at the gateway, against every strict provider simulator."""

from __future__ import annotations

import json

import openai
import pytest

from gateway.demo import FAMILIES, TOOLS, demo_script
from gateway.simulators.base import Reply, ToolCallSpec

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
# families whose demo target emits readable reasoning (openai_chat models return none)
REASONING = {"anthropic", "openai_responses", "gemini", "mistral", "kimi", "deepseek"}
USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is six times seven?"}]


def _extra(obj: object, name: str) -> object:
    """A field the OpenAI SDK does not model (reasoning_content, reasoning_details)."""
    return (getattr(obj, "model_extra", None) or {}).get(name)


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_streamed_text_reasoning_and_usage(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(text="The answer is 42.", reasoning="Six sevens make forty-two.", chunk_size=5)
    )
    client = stack.client()
    stream = await client.chat.completions.create(
        model=name, messages=USER, stream=True, stream_options={"include_usage": True}
    )
    text, reasoning, finishes, usage, roles = [], [], [], None, []
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            roles.append(choice.delta.role)
            text.append(choice.delta.content or "")
            reasoning.append(_extra(choice.delta, "reasoning_content") or "")
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
    assert roles[0] == "assistant"
    assert "".join(text) == "The answer is 42."
    assert "".join(reasoning) == ("Six sevens make forty-two." if kind in REASONING else "")
    assert finishes == ["stop"]
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert stack.hub.states[kind].rejections == []


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_parallel_tool_calls_non_streaming(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(
            text="Checking both.",
            reasoning="Two cities, two calls.",
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris"}),
                ToolCallSpec("get_weather", {"city": "Tokyo"}),
            ],
        )
    )
    client = stack.client()
    raw = await client.chat.completions.with_raw_response.create(model=name, messages=USER, tools=TOOLS)
    assert raw.headers["x-gateway-provider"] == name
    assert raw.headers["x-gateway-attempts"] == "1"
    assert raw.headers["x-session-id"].startswith("sess_")
    completion = raw.parse()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking both."
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_weather"]
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"}, {"city": "Tokyo"}]
    ids = [c.id for c in calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") and len(i) <= 40 for i in ids)
    assert completion.usage.prompt_tokens > 0


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_streamed_tool_calls_have_stable_indexes(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(
            reasoning="Weather first, then time.",
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris"}),
                ToolCallSpec("get_time", {"city": "Paris"}),
            ],
        )
    )
    client = stack.client()
    stream = await client.chat.completions.create(model=name, messages=USER, tools=TOOLS, stream=True)
    calls: dict[int, dict] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                slot = calls.setdefault(delta.index, {"ids": [], "name": "", "args": ""})
                if delta.id:
                    slot["ids"].append(delta.id)
                if delta.function and delta.function.name:
                    slot["name"] += delta.function.name
                if delta.function and delta.function.arguments:
                    slot["args"] += delta.function.arguments
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert sorted(calls) == [0, 1]
    assert [calls[i]["name"] for i in (0, 1)] == ["get_weather", "get_time"]
    assert [json.loads(calls[i]["args"]) for i in (0, 1)] == [{"city": "Paris"}, {"city": "Paris"}]
    for i in (0, 1):
        assert len(calls[i]["ids"]) == 1, "the id is sent once, on the call's first fragment"
        assert calls[i]["ids"][0].startswith("call_")


TOOL_RESULTS = {
    ("get_weather", "Paris"): "sunny, 21C",
    ("get_weather", "Tokyo"): "rain, 17C",
    ("get_time", "Tokyo"): "22:40",
}
# continuity tokens each simulator verifies over the three-turn loop: every replayed thinking
# block / reasoning item / step-opening Gemini signature of the open tool loop, turn 2 has one,
# turn 3 has two
VERIFIED = {"anthropic": 3, "openai_responses": 3, "gemini": 3}


@pytest.mark.parametrize("name,kind", FAMILY)
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
async def test_same_provider_tool_loop_keeps_continuity(stack, name, kind, streaming):
    """The client sends every assistant message back exactly as the SDK gave it (including the
    reasoning_details extra); the strict simulator accepts each turn and verifies its tokens."""
    state = stack.hub.states[kind]
    state.push(*demo_script())
    client = stack.client()
    messages: list[dict] = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
    finishes = []
    for _ in range(3):
        if streaming:
            message, finish = await _stream_message(client, name, messages)
        else:
            completion = await client.chat.completions.create(model=name, messages=messages, tools=TOOLS)
            message = completion.choices[0].message.model_dump(exclude_none=True)
            finish = completion.choices[0].finish_reason
        finishes.append(finish)
        messages.append(message)
        for call in message.get("tool_calls", ()):
            city = json.loads(call["function"]["arguments"])["city"]
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": TOOL_RESULTS[(call["function"]["name"], city)],
                }
            )
    assert finishes == ["tool_calls", "tool_calls", "stop"]
    assert state.rejections == []
    assert state.verified_tokens == VERIFIED.get(kind, 0)
    assert len(state.requests) == 3
    assert messages[-1]["content"].startswith("Paris is sunny")
    if kind in ("anthropic", "openai_responses", "gemini"):
        assert any(m.get("reasoning_details") for m in messages if m["role"] == "assistant")
    assert state.quality_warnings == []


async def _stream_message(client: openai.AsyncOpenAI, model: str, messages: list[dict]) -> tuple[dict, str]:
    stream = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True)
    content, reasoning, details, calls, finish = [], [], [], {}, None
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            content.append(delta.content or "")
            reasoning.append(_extra(delta, "reasoning_content") or "")
            details.extend(_extra(delta, "reasoning_details") or ())
            for part in delta.tool_calls or ():
                slot = calls.setdefault(
                    part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = part.id or slot["id"]
                if part.function:
                    slot["function"]["name"] += part.function.name or ""
                    slot["function"]["arguments"] += part.function.arguments or ""
            finish = choice.finish_reason or finish
    message: dict = {"role": "assistant", "content": "".join(content) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, finish


async def test_client_credentials_never_reach_upstream(stack):
    stack.hub.states["anthropic"].push(Reply(text="hi"))
    client = stack.client()
    await client.chat.completions.create(model="claude", messages=USER)
    recorded = stack.hub.states["anthropic"].requests[-1]
    assert "client-key-never-forwarded" not in " ".join(f"{k}: {v}" for k, v in recorded.headers.items())
    assert recorded.headers.get("x-api-key") == stack.hub.states["anthropic"].api_key


async def test_unknown_model_is_404_in_openai_shape(stack):
    client = stack.client()
    with pytest.raises(openai.NotFoundError) as info:
        await client.chat.completions.create(model="no-such-group", messages=USER)
    assert info.value.body["code"] == "model_not_found"
    assert info.value.body["param"] == "model"
    # it names what can be asked for instead
    message = info.value.body["message"]
    assert "model groups: claude, openai, gemini, openai-chat, mistral, kimi, deepseek;" in message
    assert "providers: " in message


async def test_bad_request_names_the_json_path(stack):
    client = stack.client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="claude",
            messages=[
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
                    ],
                },
            ],
        )
    assert info.value.body["param"] == "messages[1].tool_calls[0].function.arguments"


async def test_a_transcript_with_nothing_answerable_is_a_400(stack):
    client = stack.client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="claude", messages=[{"role": "tool", "tool_call_id": "call_gone", "content": "orphan"}]
        )
    assert "no message a provider can answer" in info.value.body["message"]
    assert stack.hub.states["anthropic"].requests == [], "nothing was sent upstream"
