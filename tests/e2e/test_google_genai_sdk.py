"""The official google-genai SDK, pointed at the gateway's Gemini API, against every strict
provider simulator: generate, stream, function calling round trips, countTokens, errors."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types

from gateway.demo import FAMILIES
from gateway.simulators.base import Fault, Reply, ToolCallSpec

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Current weather for a city",
    parameters_json_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


OPEN: list[genai.Client] = []


def client(stack, api_version: str = "v1beta") -> genai.Client:
    made = genai.Client(
        api_key="client-key-never-forwarded",
        http_options=types.HttpOptions(base_url=stack.url, api_version=api_version),
    )
    OPEN.append(made)
    return made


@pytest.fixture(autouse=True)
async def close_clients():
    """Each test's clients closed on its own loop (an SDK client left to the garbage collector
    closes its connections on a loop that is gone, and logs that error in a later test)."""
    yield
    while OPEN:
        made = OPEN.pop()
        await made.aio.aclose()
        made.close()


def no_rejections(stack) -> None:
    for state in stack.hub.states.values():
        assert state.rejections == [], state.rejections


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_generate_and_stream(stack, name, kind):
    stack.hub.states[kind].push(
        Reply(text="The answer is 42."), Reply(text="Forty-two, streamed.", chunk_size=4)
    )
    gemini = client(stack).aio
    config = types.GenerateContentConfig(system_instruction="Be brief.", max_output_tokens=512)
    answer = await gemini.models.generate_content(model=name, contents="Six times seven?", config=config)
    assert answer.text == "The answer is 42."
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP
    assert answer.usage_metadata.prompt_token_count > 0
    chunks = [
        c
        async for c in await gemini.models.generate_content_stream(
            model=name, contents="Again, streamed", config=config
        )
    ]
    assert "".join(c.text or "" for c in chunks) == "Forty-two, streamed."
    assert len(chunks) > 2
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.total_token_count > 0
    no_rejections(stack)


@pytest.mark.parametrize("name,kind", FAMILY)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_function_calling_round_trip(stack, name, kind, stream):
    state = stack.hub.states[kind]
    state.push(
        Reply(reasoning="Paris first.", tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]),
        Reply(text="It is sunny in Paris."),
    )
    gemini = client(stack).aio
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(include_thoughts=True),
    )
    history = [types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])]

    async def ask() -> types.GenerateContentResponse | list[types.GenerateContentResponse]:
        if stream:
            return [
                c
                async for c in await gemini.models.generate_content_stream(
                    model=name, contents=history, config=config
                )
            ]
        return await gemini.models.generate_content(model=name, contents=history, config=config)

    first = await ask()
    parts = (
        [p for c in first for p in c.candidates[0].content.parts or []]
        if stream
        else first.candidates[0].content.parts
    )
    calls = [p.function_call for p in parts if p.function_call]
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert calls[0].id
    history.append(types.Content(role="model", parts=parts))
    history.append(
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        name="get_weather", id=calls[0].id, response={"output": "sunny, 24C"}
                    )
                )
            ],
        )
    )
    second = await ask()
    text = "".join(c.text or "" for c in second) if stream else second.text
    assert text == "It is sunny in Paris."
    no_rejections(stack)
    sent = state.requests[-1].body
    assert "sunny, 24C" in str(sent)


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_count_tokens(stack, name, kind):
    gemini = client(stack).aio
    counted = await gemini.models.count_tokens(model=name, contents="How many tokens is this sentence?")
    assert counted.total_tokens > 0


async def test_errors_in_googles_envelope(stack):
    gemini = client(stack).aio
    with pytest.raises(errors.ClientError) as exc:
        await gemini.models.generate_content(model="no-such-model", contents="hi")
    assert exc.value.code == 404 and exc.value.status == "NOT_FOUND"
    stack.hub.states["gemini"].push(*[Fault(status=429, retry_after=7)] * 5)
    with pytest.raises(errors.ClientError) as exc:
        await gemini.models.generate_content(model="gemini", contents="hi")
    assert exc.value.code == 429 and exc.value.status == "RESOURCE_EXHAUSTED"
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"} in exc.value.details[
        "error"
    ]["details"]


async def test_models_list_and_get(stack):
    gemini = client(stack).aio
    names = [m.name async for m in await gemini.models.list()]
    assert "models/gemini" in names and "models/claude" in names
    model = await gemini.models.get(model="claude")
    assert model.name == "models/claude"
    v1 = client(stack, "v1").aio
    assert "models/gemini" in [m.name async for m in await v1.models.list()]


@pytest.mark.parametrize("name,kind", [("gemini", "gemini"), ("deepseek", "deepseek")])
async def test_a_stream_broken_after_its_first_chunk_ends_with_googles_error(stack, name, kind):
    stack.hub.states[kind].push(
        Fault(
            status=503, after_events=8, reply=Reply(text="This answer will be cut short. " * 4, chunk_size=3)
        )
    )
    gemini = client(stack).aio
    received = []
    with pytest.raises(errors.APIError) as exc:
        async for chunk in await gemini.models.generate_content_stream(model=name, contents="Tell me more"):
            received.append(chunk.text or "")
    assert "".join(received), "content came before the break"
    assert exc.value.code >= 500 and exc.value.status in ("INTERNAL", "UNAVAILABLE")  # as the family said
