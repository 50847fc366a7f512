"""Structured output through the gateway with the clients people use: the openai SDK's
`.parse`, LangChain `with_structured_output` (its default json_schema method), pydantic-ai
`NativeOutput` and the OpenAI Agents SDK `output_type` (on its Chat Completions model: the Agents
SDK defaults to the Responses API, which has its own ingress). Every family the config routes to
answers with an object the client validates; the strict simulators check each provider got the
format its API takes and answer with JSON valid for the schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from aiohttp import web
from pydantic import BaseModel

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, FAMILIES, demo_config
from gateway.metrics import Metrics
from gateway.simulators.base import Reply, SimulatorHub
from tests.sdk_timeout import SDK_TIMEOUT

# (model group, provider kind, how the provider was asked): the demo families, plus an Anthropic
# model without native JSON outputs (forced answer tool, thinking off) and a Kimi model with them
EXTRA = {
    "claude-legacy": ("claude", "claude-opus-4-1", {"thinking_budget": 2048}),
    "kimi-native": ("kimi", "kimi-k2.5", {}),
}
GROUPS = [(name, kind) for name, kind, _, _ in FAMILIES] + [
    ("claude-legacy", "anthropic"),
    ("kimi-native", "kimi"),
]
GROUP = [pytest.param(name, kind, id=name) for name, kind in GROUPS]
PROMPT = "What is the weather in Paris? Answer as JSON."


class Weather(BaseModel):
    city: str
    temperature_c: float
    conditions: list[str]


WEATHER = {"city": "Paris", "temperature_c": 21.5, "conditions": ["sunny", "light wind"]}


class Stack:
    def __init__(self, hub: SimulatorHub, url: str, metrics: Metrics) -> None:
        self.hub, self.url, self.metrics = hub, url, metrics
        self.clients: list[openai.AsyncOpenAI] = []

    def client(self) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=SDK_TIMEOUT
        )
        self.clients.append(client)
        return client


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with SimulatorHub() as hub:
        data = demo_config(hub)
        for name, (provider, model, options) in EXTRA.items():
            data["models"][name] = {"targets": [{"provider": provider, "model": model, **options}]}
        config = config_from_dict(data, source="<test>")
        metrics = Metrics()
        app = create_app(config, {DEMO_KEY_ENV: hub.states["anthropic"].api_key}, metrics)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        stack = Stack(hub, f"http://{config.server.host}:{config.server.port}", metrics)
        try:
            yield stack
        finally:
            for client in stack.clients:
                await client.close()
            await runner.cleanup()


def script(stack: Stack, kind: str, n: int = 1) -> None:
    for _ in range(n):
        stack.hub.states[kind].push(Reply(data=WEATHER, reasoning="Paris: sunny."))


def last_body(stack: Stack, kind: str) -> dict[str, Any]:
    state = stack.hub.states[kind]
    assert state.rejections == []
    return state.requests[-1].body


def check_upstream_format(name: str, kind: str, body: dict[str, Any]) -> None:
    """Each family was asked the way its API takes a JSON-schema answer."""
    if kind in ("openai_chat", "mistral") or name == "kimi-native":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["schema"]["required"]
    elif kind in ("deepseek", "kimi"):
        assert body["response_format"] == {"type": "json_object"}
        assert "temperature_c" in body["messages"][0]["content"]  # the schema, in the instructions
    elif kind == "openai_responses":
        assert body["text"]["format"]["type"] == "json_schema"
    elif kind == "gemini":
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json" and "responseJsonSchema" in config
    elif name == "claude-legacy":
        assert body["tool_choice"]["type"] == "tool" and "thinking" not in body
        assert body["tools"][-1]["input_schema"]["properties"]["temperature_c"]
    else:
        assert body["output_config"]["format"]["schema"]["additionalProperties"] is False


@pytest.mark.parametrize("name,kind", GROUP)
async def test_openai_parse(stack, name, kind):
    script(stack, kind)
    completion = await stack.client().chat.completions.parse(
        model=name, messages=[{"role": "user", "content": PROMPT}], response_format=Weather
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls in (None, [])
    assert choice.message.parsed == Weather(**WEATHER)
    check_upstream_format(name, kind, last_body(stack, kind))


@pytest.mark.parametrize("name,kind", GROUP)
async def test_openai_parse_streamed(stack, name, kind):
    script(stack, kind)
    async with stack.client().chat.completions.stream(
        model=name, messages=[{"role": "user", "content": PROMPT}], response_format=Weather
    ) as stream:
        completion = await stream.get_final_completion()
    assert completion.choices[0].message.parsed == Weather(**WEATHER)
    assert completion.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("name,kind", GROUP)
async def test_langchain_with_structured_output(stack, name, kind):
    from langchain_openai import ChatOpenAI

    script(stack, kind)
    llm = ChatOpenAI(
        base_url=f"{stack.url}/v1", api_key="unused", model=name, max_retries=0, timeout=SDK_TIMEOUT
    )
    result = await llm.with_structured_output(Weather).ainvoke(PROMPT)
    assert result == Weather(**WEATHER)
    check_upstream_format(name, kind, last_body(stack, kind))


@pytest.mark.parametrize("name,kind", GROUP)
async def test_pydantic_ai_native_output(stack, name, kind):
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    script(stack, kind)
    model = OpenAIChatModel(name, provider=OpenAIProvider(openai_client=stack.client()))
    agent = Agent(model, output_type=NativeOutput(Weather))
    result = await agent.run(PROMPT)
    assert result.output == Weather(**WEATHER)
    check_upstream_format(name, kind, last_body(stack, kind))


@pytest.mark.parametrize("name,kind", GROUP)
async def test_pydantic_ai_tool_output(stack, name, kind):
    """ToolOutput: pydantic-ai forces a tool call (tool_choice "required") and takes the answer
    from the output tool's arguments; every family's simulator must honour the forcing choice, as
    the providers do, instead of answering text."""
    from pydantic_ai import Agent, ToolOutput
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    script(stack, kind)
    model = OpenAIChatModel(name, provider=OpenAIProvider(openai_client=stack.client()))
    agent = Agent(model, output_type=ToolOutput(Weather, name="final_result"))
    result = await agent.run(PROMPT)
    assert result.output == Weather(**WEATHER)
    body = last_body(stack, kind)
    if kind == "gemini":
        assert body["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"
    elif kind == "anthropic":
        assert body["tool_choice"]["type"] in ("any", "tool")
    else:
        assert body["tool_choice"] not in (None, "auto", "none")


@pytest.mark.parametrize("name,kind", GROUP)
async def test_agents_sdk_output_type(stack, name, kind):
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    script(stack, kind)
    agent = Agent(
        name="weather",
        instructions="Report the weather.",
        model=OpenAIChatCompletionsModel(model=name, openai_client=stack.client()),
        output_type=Weather,
    )
    result = await Runner.run(agent, PROMPT)
    assert result.final_output == Weather(**WEATHER)
    check_upstream_format(name, kind, last_body(stack, kind))


async def test_a_forced_answer_tool_turns_thinking_off_and_says_so(stack):
    script(stack, "anthropic")
    raw = await stack.client().chat.completions.with_raw_response.parse(
        model="claude-legacy", messages=[{"role": "user", "content": PROMPT}], response_format=Weather
    )
    assert "thinking_off_for_forced_tool=1" in raw.headers["x-gateway-repairs"]
    assert raw.parse().choices[0].message.parsed == Weather(**WEATHER)
    samples = stack.metrics.registry.get_sample_value(
        "gateway_repairs_total", {"provider": "claude", "kind": "thinking_off_for_forced_tool"}
    )
    assert samples == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name,kind", [("openai-chat", "openai_chat"), ("openai", "openai_responses")])
async def test_a_refusal_is_message_refusal(stack, name, kind, stream):
    stack.hub.states[kind].push(Reply(refusal="I can't help with that."))
    client = stack.client()
    messages = [{"role": "user", "content": PROMPT}]
    if stream:
        async with client.chat.completions.stream(
            model=name, messages=messages, response_format=Weather
        ) as s:
            completion = await s.get_final_completion()
    else:
        completion = await client.chat.completions.parse(
            model=name, messages=messages, response_format=Weather
        )
    message = completion.choices[0].message
    assert message.refusal == "I can't help with that." and message.parsed is None
    assert not message.content and completion.choices[0].finish_reason == "stop"


async def test_an_anthropic_refusal_is_filtered_content(stack):
    stack.hub.states["anthropic"].push(Reply(refusal="No."))
    completion = await stack.client().chat.completions.create(
        model="claude", messages=[{"role": "user", "content": "x"}]
    )
    assert completion.choices[0].finish_reason == "content_filter"


async def test_a_request_no_target_can_serve_is_a_400_that_says_why(stack):
    stack_models = stack  # Gemini 2.5 cannot combine function calling with a JSON response
    client = stack_models.client()
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="gemini/gemini-2.5-flash",
            messages=[{"role": "user", "content": PROMPT}],
            tools=[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "W", "schema": Weather.model_json_schema()},
            },
        )
    message = info.value.body["message"]
    assert "cannot combine function calling with a JSON response format" in message
    assert stack.hub.states["gemini"].requests == []  # skipped before sending


# -- cached prompt tokens ---------------------------------------------------------------------
CACHE_WRITES = {"anthropic"}  # only Anthropic reports cache writes


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name,kind", [pytest.param(n, k, id=n) for n, k, _, _ in FAMILIES])
async def test_cached_prompt_tokens_reach_the_chat_usage_and_the_metrics(stack, name, kind, stream):
    stack.hub.states[kind].push(Reply(text="Hi.", cache_read=1024, cache_write=256))
    client = stack.client()
    messages = [{"role": "user", "content": "Hello"}]
    if stream:
        chunks = await client.chat.completions.create(
            model=name, messages=messages, stream=True, stream_options={"include_usage": True}
        )
        usage = None
        async for chunk in chunks:
            usage = chunk.usage or usage
    else:
        usage = (await client.chat.completions.create(model=name, messages=messages)).usage
    assert usage is not None and usage.prompt_tokens_details.cached_tokens == 1024
    assert usage.prompt_tokens >= 1024
    writes = (usage.model_extra or {}).get("cache_creation_input_tokens")
    assert writes == (256 if kind in CACHE_WRITES else None)
    sample = stack.metrics.registry.get_sample_value
    labels = {"provider": name, "model": name}
    assert sample("gateway_tokens_total", {**labels, "type": "cache_read"}) == 1024
    assert sample("gateway_tokens_total", {**labels, "type": "cache_write"}) == (
        256 if kind in CACHE_WRITES else None
    )
