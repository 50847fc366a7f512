"""The official anthropic SDK, pointed at the gateway's Messages endpoint, against every strict
provider simulator: stream and non-stream, thinking, tools, images, errors, counting."""

from __future__ import annotations

import base64
import re

import anthropic
import pytest

from gateway.demo import FAMILIES
from gateway.providers import get_adapter
from gateway.simulators.base import Fault, Reply, ToolCallSpec
from tests.metric_reads import requests_counted

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
# families whose demo target emits readable reasoning (openai_chat models return none)
REASONING = {"anthropic", "openai_responses", "gemini", "mistral", "kimi", "deepseek"}
# families that report the prompt's size before the first content
EARLY_USAGE = {"anthropic", "gemini"}
THINKING = {"type": "enabled", "budget_tokens": 2048}
USER = [{"role": "user", "content": "What is the weather in Paris and Tokyo?"}]
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
# a 1x1 transparent PNG
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def _blocks_in_order(events: list) -> list[str]:
    """The stream's block types, checking that one block is open at a time and indexes count up."""
    kinds: list[str] = []
    open_index = None
    for event in events:
        if event.type == "content_block_start":
            assert open_index is None, "a block started while another was open"
            assert event.index == len(kinds)
            open_index = event.index
            kinds.append(event.content_block.type)
        elif event.type == "content_block_delta":
            assert event.index == open_index
        elif event.type == "content_block_stop":
            assert event.index == open_index
            open_index = None
    assert open_index is None
    return kinds


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_streamed_thinking_text_and_usage(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(text="The answer is 42.", reasoning="Six sevens make forty-two.", chunk_size=5)
    )
    client = stack.anthropic()
    events = []
    async with client.messages.stream(
        model=name,
        max_tokens=4096,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "What is six times seven?"}],
        thinking=THINKING,
    ) as stream:
        async for event in stream:
            events.append(event)
        message = await stream.get_final_message()
    raw = [e for e in events if e.type not in ("text", "thinking", "signature", "input_json")]
    assert raw[0].type == "message_start" and raw[-1].type == "message_stop"
    assert raw[-2].type == "message_delta" and raw[-2].delta.stop_reason == "end_turn"
    start_usage = raw[0].message.usage
    assert start_usage.input_tokens > 0, "real or estimated, the prompt's size comes first"
    kinds = _blocks_in_order(raw)
    deltas = [e.delta.type for e in raw if e.type == "content_block_delta"]
    if kind in REASONING:
        assert kinds == ["thinking", "text"]
        thinking = message.content[0]
        assert thinking.thinking == "Six sevens make forty-two."
        assert deltas.index("signature_delta") < deltas.index("text_delta")
        # Anthropic's own signature as issued; any other issuer's continuity sealed by the gateway
        assert thinking.signature.startswith("gw1.") is (kind != "anthropic")
    else:
        assert kinds == ["text"]
    assert message.content[-1].text == "The answer is 42."
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_") and message.model == name
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens is not None
    if kind in EARLY_USAGE:
        assert start_usage.input_tokens == message.usage.input_tokens, "the provider's own figure"
    assert stack.hub.states[kind].rejections == []


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_tool_loop_non_streaming_with_thinking_replayed(stack, name, kind):
    state = stack.hub.states[kind]
    state.push(
        Reply(
            text="Checking both.",
            reasoning="Two cities, two calls.",
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris"}),
                ToolCallSpec("get_weather", {"city": "Tokyo"}),
            ],
        ),
        Reply(text="Sunny in Paris, rain in Tokyo.", reasoning="Both answered."),
    )
    client = stack.anthropic()
    raw = await client.messages.with_raw_response.create(
        model=name, max_tokens=4096, messages=USER, tools=TOOLS, thinking=THINKING
    )
    assert raw.headers["x-gateway-provider"] == name
    first = await raw.parse()
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert [c.input for c in calls] == [{"city": "Paris"}, {"city": "Tokyo"}]
    assert all(TOOL_ID.match(c.id) for c in calls) and len({c.id for c in calls}) == 2
    assert [b.type for b in first.content][-3:] == ["text", "tool_use", "tool_use"]

    history = [
        *USER,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": "sunny" if n == 0 else "rain"}
                for n, c in enumerate(calls)
            ],
        },
    ]
    second = await client.messages.create(
        model=name, max_tokens=4096, messages=history, tools=TOOLS, thinking=THINKING
    )
    assert second.stop_reason == "end_turn"
    assert second.content[-1].text == "Sunny in Paris, rain in Tokyo."
    assert state.rejections == []
    sent = state.requests[-1].body
    assert "sunny" in str(sent) and "rain" in str(sent)
    if kind == "anthropic":
        assert state.verified_tokens >= 1, "its own signed thinking went back to it"


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_streamed_tool_call_events(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(
            tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})], reasoning="One call.", chunk_size=4
        )
    )
    client = stack.anthropic()
    async with client.messages.stream(model=name, max_tokens=4096, messages=USER, tools=TOOLS) as stream:
        events = [e async for e in stream]
        message = await stream.get_final_message()
    raw = [e for e in events if e.type not in ("text", "thinking", "signature", "input_json")]
    kinds = _blocks_in_order(raw)
    assert kinds[-1] == "tool_use"
    start = next(e for e in raw if e.type == "content_block_start" and e.content_block.type == "tool_use")
    assert start.content_block.name == "get_weather" and start.content_block.input == {}
    assert any(e.type == "content_block_delta" and e.delta.type == "input_json_delta" for e in raw)
    assert raw[-2].delta.stop_reason == "tool_use"
    assert message.content[-1].input == {"city": "Paris"}


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_images(stack, name, kind):
    stack.hub.states[kind].push(Reply(text="A transparent pixel."))
    client = stack.anthropic()
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "What is this?"},
    ]
    request = {"model": name, "max_tokens": 1024, "messages": [{"role": "user", "content": content}]}
    model = next(m for n, _, m, _ in FAMILIES if n == name)
    sees = get_adapter(kind).capabilities.media.sees_images(model)
    message = await client.messages.create(**request)
    assert message.content[-1].text == "A transparent pixel."
    sent = str(stack.hub.states[kind].requests[-1].body)
    if sees:
        assert PNG in sent, "the image reached the provider"
    else:  # a model without vision (DeepSeek, Kimi K2): a placeholder says so, never a 400
        assert PNG not in sent and "[image omitted:" in sent
    assert stack.hub.states[kind].rejections == []


async def test_errors_come_in_anthropics_envelope(stack):
    client = stack.anthropic()
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client.messages.create(model="no-such-group", max_tokens=10, messages=USER)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": caught.value.body["error"]["message"]},
    }
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(
            model="claude", max_tokens=10, messages=[{"role": "user", "content": [{"type": "text"}]}]
        )
    assert caught.value.body["error"]["message"] == "messages.0.content.0.text: Field required"
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(
            model="gemini",
            max_tokens=10,
            messages=USER,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
        )
    assert (
        "hosted tool 'web_search_20250305' runs only on anthropic targets"
        in caught.value.body["error"]["message"]
    )


async def test_a_context_overflow_from_any_family_says_prompt_is_too_long(stack):
    stack.hub.states["gemini"].push(
        Fault(
            status=400,
            message="The input token count (250000) exceeds the maximum number of tokens allowed (200000).",
        )
    )
    with pytest.raises(anthropic.BadRequestError) as caught:
        await stack.anthropic().messages.create(model="gemini", max_tokens=10, messages=USER)
    message = caught.value.body["error"]["message"]
    assert message.startswith("prompt is too long: 250000 tokens > 200000 maximum")
    assert caught.value.body["error"]["type"] == "invalid_request_error"


async def test_every_target_overloaded_is_529(stack):
    # the group's one target answers 529 on the first try and on both retries after a backoff
    stack.hub.states["anthropic"].push(*[Fault(status=529)] * 3)
    with pytest.raises(anthropic.InternalServerError) as caught:
        await stack.anthropic().messages.create(model="claude", max_tokens=10, messages=USER)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert len(stack.hub.states["anthropic"].requests) == 3
    assert requests_counted(stack.metrics, "anthropic_messages", "claude", "none", "upstream_error") == 1


@pytest.mark.parametrize(
    "name,kind,source",
    [
        ("claude", "anthropic", "provider"),
        ("gemini", "gemini", "provider"),
        ("openai", "openai_responses", "estimate"),
    ],
)
async def test_count_tokens(stack, name, kind, source):
    client = stack.anthropic()
    request = {
        "model": name,
        "system": "Be brief.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "text", "text": "What is this?"},
                ],
            }
        ],
        "tools": TOOLS,
        "thinking": THINKING,
    }
    raw = await client.messages.with_raw_response.count_tokens(**request)
    assert raw.headers["x-gateway-token-count"] == source
    counted = (await raw.parse()).input_tokens
    if source == "provider":
        body = stack.hub.states[kind].requests[-1].body
        assert stack.hub.states[kind].rejections == []
        assert "get_weather" in str(body) and "Be brief." in str(body)
        if kind == "anthropic":  # counted as it would be sent: thinking on, with its budget
            assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    else:
        assert stack.hub.states[kind].requests == [], "estimated without a provider call"
        # the estimate includes the image (1600) and the tool definition, not only the text
        assert counted > 1600
    assert counted > 0


async def test_models_list_in_anthropics_shape(stack):
    page = await stack.anthropic().models.list()
    names = [m.id for m in page.data]
    assert names == [name for name, _, _, _ in FAMILIES]
    assert all(m.type == "model" for m in page.data)


async def test_redacted_thinking_round_trips_to_anthropic(stack):
    state = stack.hub.states["anthropic"]
    state.push(
        Reply(
            reasoning="Visible part.",
            redacted_reasoning=True,
            tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})],
        ),
        Reply(text="Sunny."),
    )
    client = stack.anthropic()
    first = await client.messages.create(
        model="claude", max_tokens=4096, messages=USER, tools=TOOLS, thinking=THINKING
    )
    assert [b.type for b in first.content] == ["thinking", "redacted_thinking", "tool_use"]
    assert not first.content[1].data.startswith("gw1."), "Anthropic's own data, as issued"
    call = first.content[2]
    history = [
        *USER,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
    ]
    second = await client.messages.create(
        model="claude", max_tokens=4096, messages=history, tools=TOOLS, thinking=THINKING
    )
    assert second.content[-1].text == "Sunny."
    replayed = state.requests[-1].body["messages"][1]["content"]
    assert [b["type"] for b in replayed] == ["thinking", "redacted_thinking", "tool_use"]
    assert state.rejections == [] and state.verified_tokens == 2


# -- message threads (the `thread` field): refused by name, never ignored -----------------------


@pytest.mark.parametrize("name,kind", [FAMILY[0], FAMILY[2]])
async def test_the_sdk_tool_runner_goes_on_without_a_thread_and_keeps_the_history(stack, name, kind):
    """The default tool runner asks for a thread; the gateway refuses it with the API's
    `thread_unsupported_request` detail, and the runner goes on unthreaded: every turn carries
    the whole history, and the loop ends with the answer."""
    from anthropic import beta_async_tool

    @beta_async_tool
    async def get_weather(city: str) -> str:
        """Current weather for a city"""
        return f"{city}: sunny"

    stack.hub.states[kind].push(
        Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]), Reply(text="Paris: sunny.")
    )
    client = stack.anthropic()
    runner = client.beta.messages.tool_runner(model=name, max_tokens=1024, tools=[get_weather], messages=USER)
    final = await runner.until_done()
    assert final.content[-1].text == "Paris: sunny."
    state = stack.hub.states[kind]
    assert state.rejections == []
    assert len(state.requests) == 2  # the refused threaded turn never reached the provider
    last = str(state.requests[-1].body)
    assert "What is the weather in Paris and Tokyo?" in last and "sunny" in last, "the whole history went up"


async def test_a_thread_send_is_a_clear_400_naming_the_thread_not_a_lost_history(stack):
    client = stack.anthropic()
    thread = client.beta.messages.thread(model="claude", max_tokens=1024)
    with pytest.raises(anthropic.BadRequestError) as info:
        await thread.send({"role": "user", "content": "Hello"})
    error = info.value.body["error"]
    assert error["details"] == {"error_code": "thread_unsupported_request", "unsupported": ["thread"]}
    assert error["message"].startswith("thread: message threads are not supported by this gateway")
    assert stack.hub.states["anthropic"].requests == []

    # asked to go on without one, the thread helper sends the whole conversation each turn
    thread = client.beta.messages.thread(
        model="claude", max_tokens=1024, unsupported_request_behavior="continue_unthreaded"
    )
    await thread.send({"role": "user", "content": "My name is Ada."})
    await thread.send({"role": "user", "content": "What is my name?"})
    second = stack.hub.states["anthropic"].requests[-1].body
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert "thread" not in second
