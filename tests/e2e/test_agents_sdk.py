"""The OpenAI Agents SDK with its default model (the Responses API) pointed at the gateway runs a
tool loop to every strict provider simulator."""

from __future__ import annotations

import json

import openai
import pytest
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from tests.e2e.gateway_stack import config_with, serve
from tests.sdk_timeout import SDK_TIMEOUT

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: sunny, 21C"


@pytest.fixture(autouse=True)
def no_tracing():
    set_tracing_disabled(True)  # the SDK would otherwise export traces to OpenAI
    yield


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_agent_tool_loop_through_the_default_responses_model(name, kind):
    async with SimulatorHub() as hub, serve(hub, config_with(hub)) as gateway:
        hub.states[kind].push(
            Reply(reasoning="Look it up.", tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]),
            Reply(text="Paris is sunny at 21C."),
        )
        client = openai.AsyncOpenAI(
            base_url=gateway.v1, api_key="client-key-never-forwarded", max_retries=0, timeout=SDK_TIMEOUT
        )
        set_default_openai_client(client, use_for_tracing=False)
        # a model name alone: the SDK's default provider, which speaks the Responses API
        agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather], model=name)
        result = await Runner.run(agent, "What is the weather in Paris?")
        assert result.final_output == "Paris is sunny at 21C."
        state = hub.states[kind]
        assert state.rejections == []
        assert len(state.requests) == 2
        assert "Paris: sunny, 21C" in json.dumps(state.requests[1].body)
        assert (
            gateway.sample(
                "gateway_requests_total", ingress="responses", model=name, provider=name, outcome="ok"
            )
            == 2
        )
