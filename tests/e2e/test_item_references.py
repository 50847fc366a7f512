"""`item_reference` input items through the gateway with the official openai SDK: a client that
keeps its conversation as items (`store: true`) names an earlier answer's reasoning and text by
id; the provider gets the whole earlier turn back (its continuity token verified by the simulator
that issued it), streamed or not, mixed with full items, naming older answers of a chain, with
`previous_response_id` set (no duplicate), from another family; another tenant's or an unknown id
is a 400 `item_not_found` in the Responses envelope."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from tests.e2e.gateway_stack import Gateway, config_with, serve
from tests.sdk_timeout import SDK_TIMEOUT

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": False,
    }
]
QUESTION = {"role": "user", "content": "Weather in Paris?"}
FIRST = Reply(
    text="Let me look that up.",
    reasoning="The user wants the weather.",
    tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})],
    chunk_size=4,
)


def client(gateway: Gateway, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gateway.v1, api_key=key, max_retries=0, timeout=SDK_TIMEOUT)


async def create(sdk: openai.AsyncOpenAI, stream: bool, **options: Any) -> Any:
    if not stream:
        return await sdk.responses.create(tools=TOOLS, **options)
    async with sdk.responses.stream(tools=TOOLS, **options) as events:
        return await events.get_final_response()


def referenced(output: list) -> list[dict]:
    """An answer's items as the Vercel AI SDK sends them back: reasoning and text by reference,
    the function calls in full, then their results."""
    items: list[dict] = []
    for item in output:
        if item.type in ("reasoning", "message"):
            items.append({"type": "item_reference", "id": item.id})
        elif item.type == "function_call":
            items.append(
                {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments,
                }
            )
    results = [
        {"type": "function_call_output", "call_id": i.call_id, "output": "sunny, 21C"}
        for i in output
        if i.type == "function_call"
    ]
    return items + results


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_named_items_reach_the_provider_as_the_whole_earlier_turn(stack, stream):
    state = stack.hub.states["anthropic"]
    state.push(FIRST, Reply(text="It is sunny in Paris."))
    sdk = stack.client()
    first = await create(sdk, stream, model="claude", input=[QUESTION])
    assert [i.type for i in first.output] == ["reasoning", "message", "function_call"]
    second = await create(sdk, stream, model="claude", input=[QUESTION, *referenced(first.output)])
    assert second.output_text == "It is sunny in Paris."
    assert state.rejections == [] and state.verified_tokens >= 1  # the thinking signature came back
    turn = state.requests[1].body["messages"][1]
    assert [b["type"] for b in turn["content"]] == ["thinking", "text", "tool_use"]
    assert turn["content"][0]["thinking"] == "The user wants the weather."
    assert turn["content"][1]["text"] == "Let me look that up."
    assert "sunny, 21C" in json.dumps(state.requests[1].body["messages"][2])


async def test_items_of_older_answers_and_with_previous_response_id(stack):
    state = stack.hub.states["anthropic"]
    state.push(FIRST, Reply(text="Sunny."), Reply(text="Still sunny."), Reply(text="Yes."))
    sdk = stack.client()
    first = await create(sdk, False, model="claude", input=[QUESTION])
    second = await create(sdk, False, model="claude", input=[QUESTION, *referenced(first.output)])
    # the whole conversation as items: both earlier answers named by id
    again = {"role": "user", "content": "And now?"}
    whole = [QUESTION, *referenced(first.output), *referenced(second.output), again]
    await create(sdk, True, model="claude", input=whole)
    sent = state.requests[2].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[3]["content"] == [{"type": "text", "text": "Sunny."}]
    # continuing the second answer by id while naming its text again: no duplicate reaches it
    await create(
        sdk,
        False,
        model="claude",
        previous_response_id=second.id,
        input=[*referenced(second.output), {"role": "user", "content": "Sure?"}],
    )
    sent = state.requests[3].body["messages"]
    assert json.dumps(sent).count("Sunny.") == 1 and json.dumps(sent).count("Let me look that up.") == 1
    assert state.rejections == []


async def test_items_kept_from_one_family_replay_to_another_by_its_rules(stack):
    hub = stack.hub
    hub.states["anthropic"].push(FIRST)
    hub.states["gemini"].push(Reply(text="Sunny, says Gemini."))
    sdk = stack.client()
    first = await create(sdk, False, model="claude", input=[QUESTION])
    second = await create(sdk, True, model="gemini", input=[QUESTION, *referenced(first.output)])
    assert second.output_text == "Sunny, says Gemini."
    assert hub.states["gemini"].rejections == []
    assert "Let me look that up." in json.dumps(hub.states["gemini"].requests[0].body)


async def test_another_tenants_or_an_unknown_item_is_item_not_found():
    async with (
        SimulatorHub() as hub,
        serve(
            hub,
            config_with(hub, auth={"tokens_env": ["TOKEN_A", "TOKEN_B"]}),
            {"TOKEN_A": "token-a", "TOKEN_B": "token-b"},
        ) as gateway,
    ):
        hub.states["anthropic"].push(FIRST)
        first = await create(client(gateway, "token-a"), False, model="claude", input=[QUESTION])
        for key, named in (("token-b", first.output[1].id), ("token-a", "msg_" + "9" * 5000)):
            reference = {"type": "item_reference", "id": named}
            with pytest.raises(openai.BadRequestError) as caught:
                await create(client(gateway, key), False, model="claude", input=[QUESTION, reference])
            error = caught.value.body
            assert error["code"] == "item_not_found" and error["type"] == "invalid_request_error"
            assert error["param"] == "input[1].id" and named[:100] in error["message"]
            assert len(error["message"]) < 500
    assert len(hub.states["anthropic"].requests) == 1  # nothing was sent on
