"""What the client asked about reasoning, honoured on every family (README "Reasoning"): the
openai (chat and Responses) and anthropic SDKs turn it off and on through all 7 families; the simulators' received
bodies ask for exactly that, in each family's own parameters, and the answer carries reasoning
only for a client that asked for it. Where the model cannot do what was asked, the answer's
X-Gateway-Reasoning header says what was sent instead."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply, ToolCallSpec

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
USER = [{"role": "user", "content": "What is six times seven?"}]
REPLY = Reply(text="42.", reasoning="Six sevens make forty-two.")


def asked(kind: str, body: dict[str, Any]) -> Any:
    """The reasoning parameters a family's body carries (None: none at all)."""
    if kind == "anthropic":
        return body.get("thinking")
    if kind == "openai_responses":
        return body.get("reasoning")
    if kind == "gemini":
        return body.get("generationConfig", {}).get("thinkingConfig")
    found = {k: body[k] for k in ("thinking", "reasoning_effort") if k in body}
    return found or None


# what each demo target (gateway/demo.py FAMILIES) is sent for a client's "off": the models that
# cannot stop reasoning (gemini-3-pro, magistral, kimi-k2-thinking, deepseek-reasoner) reason
# least, and the header says so
OFF = {
    "anthropic": (None, None),
    "openai_responses": ({"effort": "none"}, None),
    "gemini": ({"thinkingLevel": "low"}, "sent=effort=low; requested=off; by=model"),
    "openai_chat": (None, None),
    "mistral": (None, "sent=on; requested=off; by=model"),
    "kimi": (None, "sent=on; requested=off; by=model"),
    "deepseek": (None, "sent=on; requested=off; by=model"),
}
# ... and for a client's "high" (gpt-4.1 does not reason: it gets no effort, and the header says so)
HIGH = {
    "anthropic": ({"type": "enabled", "budget_tokens": 16384}, None),
    "openai_responses": ({"effort": "high", "summary": "auto"}, None),
    "gemini": ({"thinkingLevel": "high", "includeThoughts": True}, None),
    "openai_chat": (None, "sent=off; requested=effort=high; by=model"),
    "mistral": (None, None),
    "kimi": (None, None),
    "deepseek": (None, None),
}
REASONING = {"anthropic", "openai_responses", "gemini", "mistral", "kimi", "deepseek"}


def _reasoning_content(message: Any) -> Any:
    return (getattr(message, "model_extra", None) or {}).get("reasoning_content")


@pytest.mark.parametrize("effort", ["none", "high"])
@pytest.mark.parametrize("name,kind", FAMILY)
async def test_openai_sdk_reasoning_effort_on_every_family(stack, name, kind, effort):
    state = stack.hub.states[kind]
    state.push(REPLY)
    raw = await stack.client().chat.completions.with_raw_response.create(
        model=name, messages=USER, reasoning_effort=effort
    )
    body, header = (OFF if effort == "none" else HIGH)[kind]
    assert state.rejections == [] and len(state.requests) == 1
    assert asked(kind, state.requests[0].body) == body
    assert raw.headers.get("x-gateway-reasoning") == header
    message = raw.parse().choices[0].message
    assert message.content == "42."
    shown = effort == "high" and kind in REASONING
    assert _reasoning_content(message) == ("Six sevens make forty-two." if shown else None)


@pytest.mark.parametrize("thinking", ["disabled", "enabled"])
@pytest.mark.parametrize("name,kind", FAMILY)
async def test_anthropic_sdk_thinking_on_every_family_streamed(stack, name, kind, thinking):
    state = stack.hub.states[kind]
    state.push(REPLY)
    switch = {"type": "disabled"} if thinking == "disabled" else {"type": "enabled", "budget_tokens": 1024}
    async with stack.anthropic().messages.stream(
        model=name, max_tokens=4096, messages=USER, thinking=switch
    ) as stream:
        kinds = [e.content_block.type async for e in stream if e.type == "content_block_start"]
        message = await stream.get_final_message()
        header = stream.response.headers.get("x-gateway-reasoning")
    assert state.rejections == [] and len(state.requests) == 1
    sent = asked(kind, state.requests[0].body)
    if thinking == "disabled":
        assert (sent, header) == OFF[kind]
        assert kinds == ["text"]
    else:
        # the client's own budget wherever the model takes one; its nearest level elsewhere
        assert sent == {
            "anthropic": {"type": "enabled", "budget_tokens": 1024},
            "openai_responses": {"effort": "low", "summary": "auto"},
            "gemini": {"thinkingLevel": "low", "includeThoughts": True},
        }.get(kind)
        assert kinds == (["thinking", "text"] if kind in REASONING else ["text"])
    assert message.content[-1].text == "42."


async def test_a_request_that_says_nothing_keeps_the_targets_setting_and_its_dialect_default(stack):
    """Messages without `thinking`: the Messages API's default is off, but a target's own setting
    stands in for a client that said nothing (Claude's demo target has a budget)."""
    claude, gemini = stack.hub.states["anthropic"], stack.hub.states["gemini"]
    claude.push(REPLY)
    gemini.push(REPLY)
    client = stack.anthropic()
    answer = await client.messages.create(model="claude", max_tokens=4096, messages=USER)
    assert asked("anthropic", claude.requests[0].body) == {"type": "enabled", "budget_tokens": 2048}
    assert [b.type for b in answer.content] == ["thinking", "text"]
    answer = await client.messages.create(model="gemini", max_tokens=4096, messages=USER)
    assert asked("gemini", gemini.requests[0].body) == {"thinkingLevel": "low", "includeThoughts": True}
    assert [b.type for b in answer.content] == ["thinking", "text"]


async def test_reasoning_the_client_did_not_see_still_goes_back_to_its_issuer(stack):
    """deepseek-reasoner reasons although the client asked for none: the answer leaves it out,
    the store keeps it, and the next turn of the tool loop replays it as reasoning_content."""
    state = stack.hub.states["deepseek"]
    state.push(
        Reply(reasoning="Paris first.", tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]),
        Reply(text="Sunny."),
    )
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    client = stack.client()
    first = await client.chat.completions.create(
        model="deepseek", messages=USER, tools=tools, reasoning_effort="none"
    )
    message = first.choices[0].message
    assert _reasoning_content(message) is None and message.tool_calls
    call = message.tool_calls[0]
    history = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
    ]
    await client.chat.completions.create(
        model="deepseek", messages=history, tools=tools, reasoning_effort="none"
    )
    assert state.rejections == []
    replayed = [m for m in state.requests[1].body["messages"] if m["role"] == "assistant"]
    assert replayed[0]["reasoning_content"] == "Paris first."


@pytest.mark.parametrize("effort", ["none", "high"])
@pytest.mark.parametrize("name,kind", FAMILY)
async def test_responses_sdk_reasoning_effort_on_every_family_streamed(stack, name, kind, effort):
    state = stack.hub.states[kind]
    state.push(REPLY)
    async with stack.client().responses.stream(
        model=name, input="What is six times seven?", reasoning={"effort": effort}
    ) as stream:
        final = await stream.get_final_response()
    body, _ = (OFF if effort == "none" else HIGH)[kind]
    assert state.rejections == [] and len(state.requests) == 1
    assert asked(kind, state.requests[0].body) == body
    types = [item.type for item in final.output]
    shown = effort == "high" and kind in REASONING
    assert types == (["reasoning", "message"] if shown else ["message"])
    assert final.output_text == "42."
