"""Decoding an Anthropic Messages request into the canonical Request."""

from __future__ import annotations

import base64

import pytest
from multidict import CIMultiDict

from gateway.ingress.errors import ClientError
from gateway.ingress.messages.codec import CODEC
from gateway.transcript.model import (
    ANY_ISSUER,
    CacheControl,
    Continuity,
    Document,
    HostedTool,
    Image,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
)
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"k" * 32)
FOREIGN = Continuity(
    "openai", "openai", "openai_responses", "gpt-5.1", {"id": "rs_1", "encrypted_content": "x"}
)


def body(**overrides):
    return {"model": "smart", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **overrides}


def decode(payload, headers=None):
    return CODEC.decode(payload, CIMultiDict(headers or {}), SEALER)


def refused(payload, headers=None) -> ClientError:
    with pytest.raises(ClientError) as caught:
        decode(payload, headers)
    assert caught.value.status == 400
    return caught.value


def test_system_string_blocks_and_cache_breakpoints():
    assert decode(body(system="Be brief.")).request.system == (Text("Be brief."),)
    blocks = [
        {"type": "text", "text": "billing header"},
        {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
    ]
    system = decode(body(system=blocks)).request.system
    assert system == (Text("billing header"), Text("You are an agent.", cache=CacheControl("1h")))


def test_a_system_message_inside_messages_stays_at_its_place():
    messages = [
        {"role": "system", "content": "opening instructions"},
        {"role": "user", "content": "hi"},
        {
            "role": "system",
            "content": [{"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}}],
        },
    ]
    request = decode(body(messages=messages)).request
    assert request.system == (Text("opening instructions"),)
    assert [m.role for m in request.messages] == [Role.USER, Role.SYSTEM]
    assert request.messages[1].blocks == (Text("# Environment", cache=CacheControl()),)


def test_user_content_splits_into_tool_results_and_the_users_own_blocks():
    png = base64.b64encode(b"\x89PNG").decode()
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "ToolSearch",
                    "input": {"query": "select:WebFetch"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a\nb", "is_error": True},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [
                        {"type": "tool_reference", "tool_name": "WebFetch"},
                        {"type": "text", "text": "see"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": png},
                        },
                    ],
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    request = decode(body(messages=messages)).request
    assert [m.role for m in request.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER]
    assert request.messages[1].blocks == (
        ToolCall("toolu_1", "Bash", '{"command":"ls"}'),
        ToolCall("toolu_2", "ToolSearch", '{"query":"select:WebFetch"}'),
    )
    first, second = request.messages[2].blocks
    assert first == ToolResult("toolu_1", "a\nb", True)
    assert second == ToolResult(
        "toolu_2",
        "Tool WebFetch loaded.\nsee",
        False,
        (Image(f"data:image/png;base64,{png}"),),
        CacheControl(),
    )
    assert request.messages[3].blocks == (Text("and now?"),)


def test_documents_base64_text_and_url():
    content = [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            "title": "r",
        },
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
    ]
    blocks = decode(body(messages=[{"role": "user", "content": content}])).request.messages[0].blocks
    assert blocks == (
        Document("data:application/pdf;base64,JVBE", "application/pdf", "r"),
        Document(f"data:text/plain;base64,{base64.b64encode(b'plain words').decode()}", "text/plain"),
        Document("https://example.com/a.pdf", "application/pdf"),
    )
    file_source = [{"type": "document", "source": {"type": "file", "file_id": "file_1"}}]
    error = refused(body(messages=[{"role": "user", "content": file_source}]))
    assert error.message.startswith(
        "messages.0.content.0.source: document source type 'file' is not supported"
    )


def test_thinking_signatures_sealed_raw_forged_and_redacted():
    sealed = SEALER.seal(FOREIGN)
    forged = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    assistant = [
        {"type": "thinking", "thinking": "mine", "signature": "RAW-ANTHROPIC-SIG"},
        {"type": "thinking", "thinking": "theirs", "signature": sealed},
        {"type": "thinking", "thinking": "edited", "signature": forged},
        {"type": "redacted_thinking", "data": "RAW-REDACTED"},
        {"type": "text", "text": "answer"},
    ]
    inbound = decode(
        body(messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": assistant}])
    )
    blocks = inbound.request.messages[1].blocks
    echoed = Continuity("client", ANY_ISSUER, "anthropic", ANY_ISSUER, {"signature": "RAW-ANTHROPIC-SIG"})
    assert blocks[0] == Reasoning("mine", echoed)
    assert blocks[1] == Reasoning("theirs", FOREIGN)
    assert blocks[2] == Reasoning("edited", None), "a forged token is never forwarded"
    assert blocks[3].meta.data == {"redacted": "RAW-REDACTED"} and blocks[3].meta.kind == "anthropic"
    assert blocks[4] == Text("answer")
    assert inbound.ignored_tokens == 1


def test_thinking_effort_and_display():
    request = decode(body(thinking={"type": "enabled", "budget_tokens": 31999, "display": "omitted"})).request
    assert (request.thinking, request.thinking_budget) == (True, 31999)
    assert request.provider_options["anthropic"]["thinking_display"] == "omitted"
    adaptive = decode(body(thinking={"type": "adaptive"}, output_config={"effort": "max"})).request
    assert (adaptive.thinking, adaptive.thinking_budget, adaptive.reasoning_effort) == (True, None, "xhigh")
    off = decode(body(thinking={"type": "disabled"})).request
    assert off.thinking is False
    assert refused(body(thinking={"type": "enabled", "budget_tokens": 10})).message == (
        "thinking.budget_tokens: Input should be greater than or equal to 1024"
    )


def test_tools_tool_choice_and_server_tools():
    tools = [
        {"name": "Bash", "input_schema": {"type": "object", "properties": {}}, "defer_loading": True},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    request = decode(
        body(tools=tools, tool_choice={"type": "any", "disable_parallel_tool_use": True})
    ).request
    assert [t.name for t in request.tools] == ["Bash"]
    assert request.hosted_tools == (
        HostedTool(
            "anthropic",
            "web_search_20250305",
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            True,
        ),
    )
    assert request.tool_choice == ToolChoice(ToolChoiceMode.REQUIRED)
    assert request.parallel_tool_calls is False
    named = decode(body(tools=tools[:1], tool_choice={"type": "tool", "name": "Bash"})).request
    assert named.tool_choice == ToolChoice(ToolChoiceMode.TOOL, "Bash")
    assert (
        refused(body(tools=tools[:1], tool_choice={"type": "tool", "name": "Nope"})).param
        == "tool_choice.name"
    )
    assert refused(body(tools=[tools[0], tools[0]])).message == "tools: Tool names must be unique."


def test_anthropic_only_options_and_beta_headers():
    headers = CIMultiDict([("anthropic-beta", "a-1, b-2"), ("anthropic-beta", "c-3,a-1")])
    request = decode(
        body(
            metadata={"user_id": "u"},
            context_management={"edits": []},
            service_tier="auto",
            top_k=5,
            stop_sequences=["X"],
        ),
        headers,
    ).request
    assert request.provider_options == {
        "anthropic": {
            "metadata": {"user_id": "u"},
            "context_management": {"edits": []},
            "service_tier": "auto",
            "betas": ("a-1", "b-2", "c-3"),
        }
    }
    assert (request.top_k, request.stop) == (5, ("X",))


def test_session_key_headers():
    assert decode(body(), {"X-Claude-Code-Session-Id": "abc"}).session_hint.value == "abc"
    hint = decode(body(), {"X-Session-Id": "mine", "X-Claude-Code-Session-Id": "abc"}).session_hint
    assert (hint.source, hint.value) == ("X-Session-Id", "mine")
    assert decode(body()).session_hint is None


@pytest.mark.parametrize(
    "payload,message",
    [
        (body(max_tokens=None), "max_tokens: Input should be a valid integer"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
        (
            body(messages=[{"role": "user", "content": [{"type": "video"}]}]),
            "messages.0.content.0.type: 'video' blocks are not allowed in user messages",
        ),
        (
            body(messages=[{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}]),
            "messages.0.content.0.type: 'thinking' blocks are not allowed in user messages",
        ),
        (
            body(
                messages=[
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": []}],
                    }
                ]
            ),
            "messages.0.content.0.input: Input should be a valid dictionary",
        ),
        (
            body(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}],
                    }
                ]
            ),
            "messages.0.content.0.source.media_type: Field required",
        ),
        (
            body(tools=[{"name": "x", "input_schema": {"type": "array"}}]),
            "tools.0.input_schema.type: Input should be 'object'",
        ),
        (body(temperature=1.5), "temperature: Input should be less than or equal to 1"),
        ([1, 2], "request body must be a JSON object"),
        (
            body(messages=[{"role": "user", "content": []}]),
            "messages.0: all messages must have non-empty content except for the optional final assistant message",
        ),
        (
            body(
                messages=[
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": ""},
                    {"role": "user", "content": "r"},
                ]
            ),
            "messages.1: all messages must have non-empty content except for the optional final assistant message",
        ),
    ],
)
def test_invalid_requests_name_the_json_path(payload, message):
    assert refused(payload).message == message


def test_features_no_provider_family_can_honour_are_refused_by_name():
    error = refused(body(mcp_servers=[{"type": "url", "url": "https://x", "name": "x"}]))
    assert error.code == "unsupported_parameter" and error.param == "mcp_servers"
