"""The official openai SDK's Responses API (`responses.create`, `responses.stream`,
`responses.compact`) pointed at the gateway, against every strict provider simulator."""

from __future__ import annotations

import json

import aiohttp
import openai
import orjson
import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec
from tests.e2e.gateway_stack import Gateway, config_with, serve
from tests.sdk_timeout import SDK_TIMEOUT

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
# families whose simulator verifies a replayed continuity token (signature / encrypted reasoning)
VERIFIES = {"anthropic", "openai_responses", "gemini"}
# families whose demo target returns readable reasoning
REASONING = {"anthropic", "openai_responses", "gemini", "mistral", "kimi", "deepseek"}
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": False,
    },
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files with a patch",
        "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /(.|\\n)*/'},
    },
    {"type": "web_search"},
]
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"
INCLUDE = ["reasoning.encrypted_content"]


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


@pytest.fixture
async def gateway(hub):
    async with serve(hub, config_with(hub)) as gateway:
        yield gateway


def client(gateway: Gateway) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=gateway.v1, api_key="client-key-never-forwarded", max_retries=0, timeout=SDK_TIMEOUT
    )


def first_turn() -> Reply:
    return Reply(
        text="Checking.",
        reasoning="Weather and a patch.",
        tool_calls=[
            ToolCallSpec("get_weather", {"city": "Paris"}),
            ToolCallSpec("apply_patch", {"input": PATCH}),
        ],
        chunk_size=4,
    )


def results_for(output: list) -> list[dict]:
    out = []
    for item in output:
        if item.type == "function_call":
            out.append({"type": "function_call_output", "call_id": item.call_id, "output": "sunny, 21C"})
        elif item.type == "custom_tool_call":
            out.append({"type": "custom_tool_call_output", "call_id": item.call_id, "output": "Done!"})
    return out


def echoed(output: list) -> list[dict]:
    """Output items as a stateless client sends them back."""
    return [item.model_dump(mode="json", exclude_none=True) for item in output]


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_streamed_tool_loop(hub, gateway, name, kind):
    hub.states[kind].push(first_turn(), Reply(text="It is sunny and a.txt exists.", reasoning="All done."))
    sdk = client(gateway)
    question = [{"role": "user", "content": "Weather in Paris, and add a.txt"}]
    sequence: list[int] = []
    kinds: list[str] = []
    async with sdk.responses.stream(
        model=name, input=question, tools=TOOLS, include=INCLUDE, store=False, reasoning={"summary": "auto"}
    ) as stream:
        async for event in stream:
            sequence.append(event.sequence_number)
            kinds.append(event.type)
        first = await stream.get_final_response()
    assert sequence == list(range(len(sequence)))
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done")
    assert (
        "response.custom_tool_call_input.done" in kinds and "response.function_call_arguments.delta" in kinds
    )
    if kind in REASONING:
        assert "response.reasoning_summary_text.delta" in kinds
    assert first.status == "completed"
    calls = [o for o in first.output if o.type in ("function_call", "custom_tool_call")]
    assert [(c.type, c.name) for c in calls] == [
        ("function_call", "get_weather"),
        ("custom_tool_call", "apply_patch"),
    ]
    assert json.loads(calls[0].arguments) == {"city": "Paris"} and calls[1].input == PATCH
    assert first.output_text == "Checking."
    assert first.usage.input_tokens > 0 and first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.output_tokens_details.reasoning_tokens >= 0

    second_input = [*question, *echoed(first.output), *results_for(first.output)]
    async with sdk.responses.stream(
        model=name, input=second_input, tools=TOOLS, include=INCLUDE, store=False
    ) as stream:
        second = await stream.get_final_response()
    assert second.output_text == "It is sunny and a.txt exists."
    state = hub.states[kind]
    assert state.rejections == []
    if kind in VERIFIES:
        assert state.verified_tokens >= 1
    body = json.dumps(state.requests[1].body)
    assert "sunny, 21C" in body and "Done!" in body


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_create_with_previous_response_id(hub, gateway, name, kind):
    hub.states[kind].push(first_turn(), Reply(text="Sunny."))
    sdk = client(gateway)
    first = await sdk.responses.create(model=name, input="Weather in Paris, and add a.txt", tools=TOOLS)
    assert first.status == "completed" and first.id.startswith("resp_")
    second = await sdk.responses.create(
        model=name, previous_response_id=first.id, input=results_for(first.output), tools=TOOLS
    )
    assert second.output_text == "Sunny." and second.previous_response_id == first.id
    state = hub.states[kind]
    assert state.rejections == []
    if kind in VERIFIES:  # the kept transcript carries the provider's own tokens
        assert state.verified_tokens >= 1
    rebuilt = json.dumps(state.requests[1].body)
    assert "Weather in Paris" in rebuilt and "sunny, 21C" in rebuilt


async def test_an_unknown_previous_response_is_a_400(gateway):
    with pytest.raises(openai.BadRequestError) as caught:
        await client(gateway).responses.create(model="claude", previous_response_id="resp_nope", input="hi")
    assert caught.value.code == "previous_response_not_found"
    assert caught.value.body["param"] == "previous_response_id"


async def test_an_answer_kept_for_one_tenant_is_not_found_by_another(hub):
    config = config_with(hub, auth={"tokens_env": ["TOKEN_A", "TOKEN_B"]})
    async with serve(hub, config, {"TOKEN_A": "token-a", "TOKEN_B": "token-b"}) as gateway:
        hub.states["anthropic"].push(Reply(text="Hi A."))
        a = openai.AsyncOpenAI(base_url=gateway.v1, api_key="token-a", max_retries=0, timeout=SDK_TIMEOUT)
        b = openai.AsyncOpenAI(base_url=gateway.v1, api_key="token-b", max_retries=0, timeout=SDK_TIMEOUT)
        kept = await a.responses.create(model="claude", input="hello")
        with pytest.raises(openai.BadRequestError) as caught:
            await b.responses.create(model="claude", previous_response_id=kept.id, input="and?")
        assert caught.value.code == "previous_response_not_found"


async def test_store_false_keeps_nothing(hub, gateway):
    hub.states["anthropic"].push(Reply(text="Hi."))
    sdk = client(gateway)
    first = await sdk.responses.create(model="claude", input="hello", store=False)
    assert first.store is False
    with pytest.raises(openai.BadRequestError):
        await sdk.responses.create(model="claude", previous_response_id=first.id, input="and?")


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_echoed_items_alone_restore_continuity(hub, name, kind):
    """Turn one through one gateway, turn two through another with its own (empty) store and the
    same continuity secret: only the items the client sent back carry the tokens."""
    config = config_with(hub)
    config["server"]["continuity_secret_env"] = "SECRET"
    env = {"SECRET": "one secret for both replicas"}
    hub.states[kind].push(first_turn(), Reply(text="Done."))
    question = [{"role": "user", "content": "Weather in Paris, and add a.txt"}]
    async with serve(hub, config, env) as one:
        first = await client(one).responses.create(
            model=name, input=question, tools=TOOLS, include=INCLUDE, store=False
        )
    config = config_with(hub)
    config["server"]["continuity_secret_env"] = "SECRET"
    async with serve(hub, config, env) as other:
        raw = await client(other).responses.with_raw_response.create(
            model=name,
            input=[*question, *echoed(first.output), *results_for(first.output)],
            tools=TOOLS,
            store=False,
        )
    assert "continuity_restored" not in raw.headers.get("x-gateway-repairs", "")  # no store hit
    state = hub.states[kind]
    assert state.rejections == []
    if kind in VERIFIES:
        assert state.verified_tokens >= 1
    if kind in ("kimi", "deepseek"):
        replayed = [m for m in state.requests[1].body["messages"] if m.get("tool_calls")]
        assert replayed[0]["reasoning_content"] == "Weather and a patch."


async def test_a_forged_sealed_token_is_dropped_and_counted(hub, gateway):
    hub.states["anthropic"].push(Reply(text="Hi."))
    forged = {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "gw1.Zm9yZ2Vk"}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Earlier."}],
    }
    await client(gateway).responses.create(
        model="claude",
        input=[{"role": "user", "content": "hi"}, forged, answer, {"role": "user", "content": "again"}],
    )
    assert gateway.sample("gateway_ignored_continuity_tokens_total", ingress="responses") == 1
    sent = json.dumps(hub.states["anthropic"].requests[0].body)
    assert "Zm9yZ2Vk" not in sent


async def test_a_failure_after_the_first_byte_ends_with_response_failed(hub, gateway):
    hub.states["openai_chat"].push(
        Fault(
            after_events=3, mid_stream="error", reply=Reply(text="Partial answer that stops.", chunk_size=3)
        )
    )
    events = await raw_stream(gateway, {"model": "openai-chat", "input": "hi", "stream": True})
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["error", "response.failed"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["message"]
    assert "response.output_text.delta" in kinds


async def test_client_errors_use_the_openai_error_body(gateway):
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{gateway.v1}/responses", json={"model": "claude", "input": [{"type": "nope"}]}
        ) as r:
            assert r.status == 400
            error = (await r.json())["error"]
            assert error["param"] == "input[0].type" and error["type"] == "invalid_request_error"
        async with http.post(f"{gateway.v1}/responses", json={"model": "nope", "input": "hi"}) as r:
            assert r.status == 404
            assert (await r.json())["error"]["code"] == "model_not_found"
        async with http.post(
            f"{gateway.v1}/responses", json={"model": "claude", "input": "hi", "background": True}
        ) as r:
            assert r.status == 400
            assert (await r.json())["error"]["code"] == "unsupported_parameter"


async def test_compact_endpoint_and_compaction_items(hub, gateway):
    hub.states["anthropic"].push(Reply(text="The user asked about Paris weather; it is sunny."))
    sdk = client(gateway)
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
    ]
    compacted = await sdk.responses.compact(model="claude", input=history)
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["compaction"]
    asked = hub.states["anthropic"].requests[0].body
    assert "tools" not in asked and "write the summary" in json.dumps(asked["messages"][-1])

    hub.states["anthropic"].push(Reply(text="Still sunny."))
    follow = [compacted.output[0].model_dump(exclude_none=True), {"role": "user", "content": "And now?"}]
    again = await sdk.responses.create(model="claude", input=follow)
    assert again.output_text == "Still sunny."
    sent = json.dumps(hub.states["anthropic"].requests[1].body)
    assert "it is sunny" in sent


async def test_a_compaction_trigger_is_answered_with_exactly_one_compaction_item(hub, gateway):
    hub.states["gemini"].push(Reply(text="Summary: sunny in Paris.", reasoning="Summarize."))
    body = {
        "model": "gemini",
        "stream": True,
        "input": [{"role": "user", "content": "Weather in Paris?"}, {"type": "compaction_trigger"}],
        "tools": TOOLS,
    }
    events = await raw_stream(gateway, body)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["compaction"]
    assert events[-1]["type"] == "response.completed"
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["compaction"]


async def raw_stream(gateway: Gateway, body: dict) -> list[dict]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{gateway.v1}/responses", json=body) as response:
            assert response.status == 200
            raw = await response.read()
    events = []
    for frame in raw.split(b"\n\n"):
        for line in frame.split(b"\n"):
            if line.startswith(b"data: "):
                events.append(orjson.loads(line[6:]))
    return events


async def test_a_dropped_hosted_tool_is_counted_and_its_reason_logged(hub, gateway, caplog):
    hub.states["anthropic"].push(Reply(text="Hi."))
    with caplog.at_level("DEBUG", logger="gateway"):
        raw = await client(gateway).responses.with_raw_response.create(
            model="claude", input="hi", tools=TOOLS
        )
    assert "hosted_tool_dropped=1" in raw.headers["x-gateway-repairs"]
    assert "custom_tool_as_function=1" in raw.headers["x-gateway-repairs"]
    assert any("hosted_tool_dropped for claude: web_search" in r.getMessage() for r in caplog.records)
    assert gateway.sample("gateway_repairs_total", provider="claude", kind="hosted_tool_dropped") == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name,kind", [("openai-chat", "openai_chat"), ("openai", "openai_responses")])
async def test_a_refusal_is_a_refusal_part(hub, gateway, name, kind, stream):
    """A model that declines answers with a message whose part is a `refusal`, not output text,
    whichever provider produced it."""
    hub.states[kind].push(Reply(refusal="I can't help with that."))
    fmt = {"format": {"type": "json_schema", "name": "W", "schema": {"type": "object", "properties": {}}}}
    if stream:
        async with client(gateway).responses.stream(model=name, input="x", text=fmt) as events:
            seen = [e.type async for e in events]
            response = await events.get_final_response()
        assert "response.refusal.delta" in seen and "response.refusal.done" in seen
        assert "response.output_text.delta" not in seen
    else:
        response = await client(gateway).responses.create(model=name, input="x", text=fmt)
    [message] = [item for item in response.output if item.type == "message"]
    assert [(p.type, p.refusal) for p in message.content] == [("refusal", "I can't help with that.")]
    assert response.status == "completed"
