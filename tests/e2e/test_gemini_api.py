"""The Gemini API ingress over plain HTTP, where the SDKs hide the wire: Google's error envelope
on every failure, the JSON-array stream (no `alt=sse`), credentials, Google's built-in tools,
thoughts, structured output."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, ToolCallSpec
from tests.ops.conftest import Stack, running_stack


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack() as s:
        yield s


HI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


async def post(stack: Stack, path: str, body: Any, **kwargs: Any) -> tuple[int, Any, aiohttp.ClientResponse]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with stack.http.post(stack.url + path, data=data, **kwargs) as response:
        raw = await response.read()
        return response.status, raw, response


def google_error(raw: bytes, code: int, status: str) -> dict[str, Any]:
    error = orjson.loads(raw)["error"]
    assert error["code"] == code and error["status"] == status, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], list)
    return error


@pytest.mark.parametrize("base", ["/v1beta", "/v1"])
async def test_every_failure_is_in_googles_envelope(stack, base):
    status, raw, _ = await post(stack, f"{base}/models/gemini:generateContent", b"{not json")
    google_error(raw, 400, "INVALID_ARGUMENT")
    status, raw, _ = await post(stack, f"{base}/models/gemini:generateContent", {"contents": []})
    assert "contents" in google_error(raw, 400, "INVALID_ARGUMENT")["message"]
    status, raw, _ = await post(stack, f"{base}/models/gemini:frobnicate", HI)
    assert "frobnicate" in google_error(raw, 404, "NOT_FOUND")["message"]
    status, raw, _ = await post(stack, f"{base}/models/no-such-group:generateContent", HI)
    google_error(raw, 404, "NOT_FOUND")
    status, raw, _ = await post(stack, f"{base}/models/gemini", HI)
    google_error(raw, 404, "NOT_FOUND")
    async with stack.http.put(stack.url + f"{base}/models/gemini:generateContent") as response:
        google_error(await response.read(), 405, "UNIMPLEMENTED")
        assert "POST" in response.headers["Allow"]
    status, raw, _ = await post(
        stack, f"{base}/models/claude:embedContent", {"content": {"parts": [{"text": "x"}]}}
    )
    assert status == 400 and "embedContent" in google_error(raw, 400, "INVALID_ARGUMENT")["message"]
    if base == "/v1beta":
        async with stack.http.get(stack.url + "/v1beta/nothing-here") as response:
            google_error(await response.read(), 404, "NOT_FOUND")


async def test_a_stream_without_alt_sse_is_one_json_array(stack):
    stack.hub.states["gemini"].push(Reply(text="Forty-two, as an array.", chunk_size=5))
    status, raw, response = await post(stack, "/v1beta/models/gemini:streamGenerateContent", HI)
    assert status == 200 and response.content_type == "application/json"
    chunks = orjson.loads(raw)
    assert isinstance(chunks, list) and len(chunks) > 2
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert text == "Forty-two, as an array."
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["totalTokenCount"] > 0


async def test_credentials_from_header_query_or_bearer():
    def auth(data: dict[str, Any]) -> None:
        data["auth"] = {"tokens_env": ["GATEWAY_TOKENS"]}

    async with running_stack(auth, env={"GATEWAY_TOKENS": "s3cret"}) as stack:
        path = "/v1beta/models/gemini:generateContent"
        status, raw, _ = await post(stack, path, HI)
        google_error(raw, 401, "UNAUTHENTICATED")
        status, raw, _ = await post(stack, path, HI, headers={"x-goog-api-key": "wrong"})
        google_error(raw, 401, "UNAUTHENTICATED")
        for kwargs in (
            {"headers": {"x-goog-api-key": "s3cret"}},
            {"params": {"key": "s3cret"}},
            {"headers": {"Authorization": "Bearer s3cret"}},
        ):
            status, raw, _ = await post(stack, path, HI, **kwargs)
            assert status == 200, raw
        # the client's key never reaches a provider
        assert all("s3cret" not in str(r.headers) for r in stack.hub.states["gemini"].requests)


async def test_googles_built_in_tools_reach_gemini_targets_only(stack):
    body = {**HI, "tools": [{"googleSearch": {}}]}
    status, raw, _ = await post(stack, "/v1beta/models/gemini:generateContent", body)
    assert status == 200, raw
    assert stack.hub.states["gemini"].requests[-1].body["tools"] == [{"googleSearch": {}}]
    status, raw, _ = await post(stack, "/v1beta/models/claude:generateContent", body)
    assert "googleSearch" in google_error(raw, 400, "INVALID_ARGUMENT")["message"]
    assert stack.hub.states["anthropic"].requests == []


@pytest.mark.parametrize(
    "name,kind", [("gemini", "gemini"), ("claude", "anthropic"), ("deepseek", "deepseek")]
)
async def test_thoughts_only_when_asked_for(stack, name, kind):
    state = stack.hub.states[kind]
    state.push(Reply(text="42.", reasoning="Six sevens."), Reply(text="42.", reasoning="Six sevens."))
    path = f"/v1beta/models/{name}:generateContent"
    asked = {**HI, "generationConfig": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048}}}
    status, raw, _ = await post(stack, path, asked)
    parts = orjson.loads(raw)["candidates"][0]["content"]["parts"]
    assert [p["text"] for p in parts if p.get("thought")] == ["Six sevens."]
    assert [p["text"] for p in parts if not p.get("thought") and p.get("text")] == ["42."]
    status, raw, _ = await post(stack, path, HI)
    parts = orjson.loads(raw)["candidates"][0]["content"]["parts"]
    assert not any(p.get("thought") for p in parts), parts
    assert state.rejections == []


async def test_the_placeholder_signature_reaches_no_other_family(stack):
    """Gemini CLI writes `skip_thought_signature_validator` on calls that had no signature."""
    stack.hub.states["anthropic"].push(Reply(text="done"))
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "weather?"}]},
            {
                "role": "model",
                "parts": [{"functionCall": call, "thoughtSignature": "skip_thought_signature_validator"}],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "get_weather", "id": "c1", "response": {"output": "sunny"}}}
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "parametersJsonSchema": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                        },
                    }
                ]
            }
        ],
    }
    status, raw, _ = await post(stack, "/v1beta/models/claude:generateContent", body)
    assert status == 200, raw
    sent = orjson.dumps(stack.hub.states["anthropic"].requests[-1].body).decode()
    assert "skip_thought_signature_validator" not in sent and "sunny" in sent


@pytest.mark.parametrize(
    "name,kind", [("gemini", "gemini"), ("openai", "openai_responses"), ("mistral", "mistral")]
)
async def test_structured_output_from_response_json_schema(stack, name, kind):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    stack.hub.states[kind].push(Reply(data={"answer": 42}))
    body = {**HI, "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}}
    status, raw, _ = await post(stack, f"/v1beta/models/{name}:generateContent", body)
    assert status == 200, raw
    text = "".join(p.get("text", "") for p in orjson.loads(raw)["candidates"][0]["content"]["parts"])
    assert orjson.loads(text) == {"answer": 42}
    assert stack.hub.states[kind].rejections == []


async def test_a_function_call_comes_whole_with_its_id(stack):
    stack.hub.states["openai_chat"].push(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]))
    body = {
        **HI,
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
                    }
                ]
            }
        ],
    }
    status, raw, _ = await post(stack, "/v1beta/models/openai-chat:streamGenerateContent?alt=sse", body)
    chunks = [orjson.loads(line[6:]) for line in raw.decode().split("\r\n\r\n") if line.startswith("data: ")]
    calls = [
        p["functionCall"]
        for c in chunks
        for p in c["candidates"][0]["content"]["parts"]
        if "functionCall" in p
    ]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["args"] == {"city": "Oslo"}
    assert calls[0]["id"]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    sent = stack.hub.states["openai_chat"].requests[-1].body["tools"][0]["function"]["parameters"]
    assert sent["properties"]["city"]["type"] == "string"


async def test_embeddings_are_served_by_a_gemini_target(stack):
    content = {"parts": [{"text": "embed me"}]}
    status, raw, response = await post(
        stack, "/v1beta/models/gemini:embedContent", {"model": "models/gemini", "content": content}
    )
    assert status == 200 and len(orjson.loads(raw)["embedding"]["values"]) == 8
    assert response.headers["X-Gateway-Provider"] == "gemini"
    sent = stack.hub.states["gemini"].requests[-1]
    assert sent.rejection is None and sent.body["model"] == "models/gemini-3-pro-preview"
    batch = {"requests": [{"model": "models/gemini", "content": content, "outputDimensionality": 4}] * 2}
    status, raw, _ = await post(stack, "/v1beta/models/gemini:batchEmbedContents", batch)
    assert status == 200 and [len(e["values"]) for e in orjson.loads(raw)["embeddings"]] == [4, 4]
    status, raw, _ = await post(stack, "/v1beta/models/gemini:embedContent", {"content": content, "bogus": 1})
    assert "bogus" in google_error(raw, 400, "INVALID_ARGUMENT")["message"], "the provider's refusal, relayed"


async def test_v1_models_answers_each_client_in_its_shape(stack):
    async with stack.http.get(stack.url + "/v1/models/claude") as response:  # OpenAI's models.retrieve
        assert await response.json() == {
            "id": "claude",
            "object": "model",
            "created": 0,
            "owned_by": "gateway",
        }
    async with stack.http.get(stack.url + "/v1/models/claude", headers={"x-goog-api-key": "k"}) as response:
        assert (await response.json())["name"] == "models/claude"
    async with stack.http.get(stack.url + "/v1/models", params={"key": "k"}) as response:
        assert "models/claude" in [m["name"] for m in (await response.json())["models"]]
    async with stack.http.get(stack.url + "/v1/models") as response:
        assert "claude" in [m["id"] for m in (await response.json())["data"]]
    async with stack.http.get(stack.url + "/v1beta/models/nope") as response:
        assert response.status == 404 and (await response.json())["error"]["status"] == "NOT_FOUND"


async def test_the_headers_go_out_before_a_long_hidden_thinking_phase(stack):
    """Gemini's SSE stream has no opening of its own and hides thoughts not asked for: the status
    and headers are not held back until the first part the client sees (a long thinking phase
    could outlast a client's header timeout)."""
    state = stack.hub.states["anthropic"]
    # the opening events and the thinking's first delta (the commit point), then a stall
    state.push(
        Fault(
            after_events=4, mid_stream="stall", stall_seconds=60.0, reply=Reply(text="42.", reasoning="Hmm.")
        )
    )
    body = {**HI, "generationConfig": {"thinkingConfig": {"includeThoughts": False, "thinkingBudget": 2048}}}
    path = "/v1beta/models/claude:streamGenerateContent?alt=sse"
    # a hang guard, not a timing assertion: without the headers the post waits out the stall
    async with asyncio.timeout(20):
        response = await stack.http.post(stack.url + path, data=orjson.dumps(body))
    async with response:
        assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
        assert state.open_streams == 1, "the upstream is still in its stall"
