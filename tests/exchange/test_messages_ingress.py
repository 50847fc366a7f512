"""The Messages ingress through the one exchange: the same repairs as chat for the same
transcript, metrics and auth, keep-alive pings, and what only some providers take."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.ingress.messages.encode import MessagesStreamEncoder
from gateway.simulators.base import Fault, Reply
from tests.metric_reads import repairs_counted, requests_counted
from tests.ops.conftest import running_stack

MESSAGES = "/v1/messages"
HEADERS = {"anthropic-version": "2023-06-01"}


async def post(stack, body: dict[str, Any], headers: dict[str, str] | None = None, path: str = MESSAGES):
    return await stack.chat(body, {**HEADERS, **(headers or {})}, path=path)


@pytest.mark.parametrize("family", ["mistral", "claude"])
async def test_one_transcript_through_chat_and_messages_counts_the_same_repairs(family):
    """A cancelled fan-out (call_B has no result) and a result for a call compaction removed
    (call_Z): whichever dialect carries the transcript, the exchange repairs it the same way."""
    calls = [("call_A", "get_weather", '{"city":"Paris"}'), ("call_B", "get_weather", '{"city":"Tokyo"}')]
    chat = {
        "model": family,
        "max_tokens": 1024,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            },
            {"role": "tool", "tool_call_id": "call_A", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_Z", "content": "stale"},
            {"role": "user", "content": "And?"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
        ],
    }
    messages = {
        "model": family,
        "max_tokens": 1024,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": i, "name": n, "input": orjson.loads(a)} for i, n, a in calls
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_A", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "call_Z", "content": "stale"},
                    {"type": "text", "text": "And?"},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    }
    async with running_stack() as stack:
        status, chat_headers, _ = await stack.chat(chat)
        assert status == 200
        status, messages_headers, _ = await post(stack, messages)
        assert status == 200
        status, streamed_headers, _ = await post(stack, {**messages, "stream": True})
        assert status == 200
        repairs = chat_headers["X-Gateway-Repairs"]
        assert repairs == messages_headers["X-Gateway-Repairs"] == streamed_headers["X-Gateway-Repairs"]
        assert "synthetic_tool_result=" in repairs and "orphan_tool_result_dropped=1" in repairs
        chat_sent, messages_sent, streamed_sent = (r.body for r in stack.hub.states[_kind(family)].requests)
        assert chat_sent == messages_sent, "the provider saw one and the same request"
        assert {**streamed_sent, "stream": None} == {**messages_sent, "stream": None}
        assert repairs_counted(stack.metrics, family, "orphan_tool_result_dropped") == 3


def _kind(family: str) -> str:
    return {"mistral": "mistral", "claude": "anthropic"}[family]


async def test_requests_are_counted_by_ingress_and_the_token_comes_from_either_header():
    def auth(data):
        data["auth"] = {"tokens_env": ["GATEWAY_TOKEN"]}

    async with running_stack(auth, env={"GATEWAY_TOKEN": "tok"}) as stack:
        body = {"model": "openai-chat", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
        status, _, payload = await post(stack, body, {"x-api-key": "wrong"})
        assert status == 401
        error = orjson.loads(payload)
        assert error["type"] == "error" and error["error"]["type"] == "authentication_error"
        assert (await post(stack, body, {"x-api-key": "tok"}))[0] == 200
        assert (await post(stack, body, {"Authorization": "Bearer tok"}))[0] == 200
        # the chat ingress takes the token from x-api-key too, and keeps its own envelope
        status, _, payload = await stack.chat(
            {"model": "openai-chat", "messages": [{"role": "user", "content": "x"}]}
        )
        assert status == 401 and orjson.loads(payload)["error"]["code"] == "invalid_api_key"
        assert requests_counted(stack.metrics, "anthropic_messages", "openai-chat", "openai-chat", "ok") == 2
        assert requests_counted(stack.metrics, "anthropic_messages", "unknown", "none", "client_error") == 1
        for sent in stack.hub.states["openai_chat"].requests:
            assert "tok" not in sent.headers.get("Authorization", "") and "x-api-key" not in sent.headers


async def test_a_long_silence_is_bridged_with_pings(monkeypatch):
    monkeypatch.setattr(MessagesStreamEncoder, "keepalive_seconds", 0.05)
    async with running_stack() as stack:
        stack.hub.states["openai_chat"].push(
            Fault(after_events=3, mid_stream="stall", stall_seconds=0.5, reply=Reply(text="thinking slowly"))
        )
        body = {
            "model": "openai-chat",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        }
        status, _, payload = await post(stack, body)
    assert status == 200
    names = [
        line.removeprefix("event: ") for line in payload.decode().splitlines() if line.startswith("event: ")
    ]
    assert names[0] == "message_start" and "ping" in names
    assert names.index("ping") > names.index("content_block_start")


async def test_a_forged_signature_is_dropped_and_counted():
    forged = "gw1." + "A" * 60
    body = {
        "model": "openai-chat",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": forged},
                    {"type": "text", "text": "a"},
                ],
            },
            {"role": "user", "content": "more"},
        ],
    }
    async with running_stack() as stack:
        assert (await post(stack, body))[0] == 200
        assert forged not in str(stack.hub.states["openai_chat"].requests[-1].body)
        ignored = {"ingress": "anthropic_messages"}
        assert (
            stack.metrics.registry.get_sample_value("gateway_ignored_continuity_tokens_total", ignored) == 1
        )


async def test_anthropic_only_options_reach_anthropic_where_valid_and_nobody_else():
    body = {
        "model": "claude",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "q"}],
        "metadata": {"user_id": "u-1"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "omitted"},
        "tools": [
            {"name": "f", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
        ],
        "top_k": 40,
    }
    betas = {"anthropic-beta": "context-management-2025-06-27,advanced-tool-use-2025-11-20"}
    async with running_stack() as stack:
        status, headers, _ = await post(stack, body, betas)
        assert status == 200
        sent = stack.hub.states["anthropic"].requests[-1]
        assert sent.body["metadata"] == {"user_id": "u-1"}
        assert sent.body["context_management"] == body["context_management"]
        assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
        assert sent.body["tools"][1] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
        assert "top_k" not in sent.body, "refused with thinking on"
        assert sent.headers["anthropic-beta"].split(",") == [
            "context-management-2025-06-27",
            "interleaved-thinking-2025-05-14",
        ]
        assert "provider_option_dropped=1" in headers["X-Gateway-Repairs"]  # the tool-search beta

        # another family never sees them; the server tool makes it refuse, naming the tool
        status, _, payload = await post(stack, {**body, "model": "gemini"}, betas)
        assert status == 400
        assert (
            "hosted tool 'web_search_20250305' runs only on anthropic targets"
            in orjson.loads(payload)["error"]["message"]
        )
        no_tool = {**body, "model": "gemini", "tools": body["tools"][:1]}
        status, headers, _ = await post(stack, no_tool, betas)
        assert status == 200
        sent = stack.hub.states["gemini"].requests[-1].body
        assert "metadata" not in sent and "context_management" not in sent
        assert sent["generationConfig"]["topK"] == 40
        # metadata, context_management, thinking display, betas
        assert "provider_option_dropped=4" in headers["X-Gateway-Repairs"]


@pytest.mark.parametrize(
    "family,kind,expected",
    [
        (
            "claude",
            "anthropic",
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
                "title": "report",
            },
        ),
        (
            "openai-chat",
            "openai_chat",
            {
                "type": "file",
                "file": {"filename": "report", "file_data": "data:application/pdf;base64,JVBERi0="},
            },
        ),
        (
            "openai",
            "openai_responses",
            {"type": "input_file", "filename": "report", "file_data": "data:application/pdf;base64,JVBERi0="},
        ),
        ("gemini", "gemini", {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}),
        ("kimi", "kimi", None),
        ("mistral", "mistral", None),
    ],
)
async def test_documents_reach_each_family_in_its_form_or_a_placeholder(family, kind, expected):
    """A family that cannot read the PDF gets a text placeholder saying so, counted (issue 20:
    never a request the provider refuses, never the client's 400)."""
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
        "title": "report",
    }
    body = {
        "model": family,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [document, {"type": "text", "text": "Summarize."}]}],
    }
    async with running_stack() as stack:
        status, headers, payload = await post(stack, body)
        assert status == 200, payload
        if expected is None:
            sent = orjson.dumps(stack.hub.states[kind].requests[-1].body).decode()
            assert "[document 'report' (application/pdf) omitted" in sent and "JVBERi0" not in sent
            assert "media_as_placeholder=1" in headers["X-Gateway-Repairs"]
            assert stack.hub.states[kind].rejections == []
            return
        assert (
            orjson.dumps(expected).decode() in orjson.dumps(stack.hub.states[kind].requests[-1].body).decode()
        )
        assert stack.hub.states[kind].rejections == []


async def test_sealed_reasoning_comes_back_without_the_store():
    """A stateless client's history is enough: the sealed signature restores another issuer's
    continuity even when the store has nothing (here: a different tenant-less session and a
    fresh gateway with the same continuity secret)."""
    secret_env = {"GATEWAY_CONTINUITY_SECRET": "s" * 32}

    def with_secret(data):
        data["server"]["continuity_secret_env"] = "GATEWAY_CONTINUITY_SECRET"

    ask = {"model": "openai", "max_tokens": 1024, "messages": [{"role": "user", "content": "q"}]}
    async with running_stack(with_secret, env=secret_env) as first:
        first.hub.states["openai_responses"].push(Reply(text="answer", reasoning="because"))
        status, _, payload = await post(first, ask)
        assert status == 200
        answer = orjson.loads(payload)["content"]
    assert answer[0]["type"] == "thinking" and answer[0]["signature"].startswith("gw1.")
    follow = {
        **ask,
        "messages": [
            *ask["messages"],
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "more"},
        ],
    }
    async with running_stack(with_secret, env=secret_env) as second:
        assert (await post(second, follow))[0] == 200
        sent = second.hub.states["openai_responses"].requests[-1].body
        reasoning = [item for item in sent["input"] if item.get("type") == "reasoning"]
        assert len(reasoning) == 1 and reasoning[0]["encrypted_content"]
        assert second.hub.states["openai_responses"].rejections == []
        assert second.hub.states["openai_responses"].verified_tokens == 1


async def test_models_list_keeps_the_openai_shape_without_anthropic_version():
    async with running_stack() as stack:
        _, _, payload = await stack.get("/v1/models")
        assert orjson.loads(payload)["object"] == "list"
        _, _, payload = await stack.get("/v1/models", HEADERS)
        listing = orjson.loads(payload)
        assert listing["has_more"] is False and listing["data"][0]["type"] == "model"


@pytest.mark.parametrize(
    "family,kind", [("claude", "anthropic"), ("openai-chat", "openai_chat"), ("gemini", "gemini")]
)
async def test_structured_output_config_is_answered_as_json_text(family, kind):
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    body = {
        "model": family,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Six times seven, as JSON."}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    async with running_stack() as stack:
        stack.hub.states[kind].push(Reply(text='{"answer": 42}'))
        status, _, payload = await post(stack, body)
        assert status == 200, payload
        message = orjson.loads(payload)
        assert [b["type"] for b in message["content"]] == ["text"]
        answer = orjson.loads(message["content"][0]["text"])  # the simulated model fills the schema
        assert set(answer) == {"answer"} and type(answer["answer"]) is int
        assert message["stop_reason"] == "end_turn"
        assert stack.hub.states[kind].rejections == []
        assert "answer" in orjson.dumps(stack.hub.states[kind].requests[-1].body).decode()
