"""Tokens echoed in LiteLLM's / Google's formats reach their provider kind on the wire."""

from __future__ import annotations

import orjson

from gateway.ingress.chat.decode import DecodeStats, decode_request
from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.transcript.model import ANY_ISSUER, Reasoning, ToolCall
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

CLAUDE = Target("claude", "anthropic", "claude-sonnet-4-5", "http://sim", thinking_budget=2048)
GEMINI = Target("gem", "gemini", "gemini-3-pro-preview", "http://sim")
SEALER = Sealer(b"test-secret")


def decode(body, stats=None):
    return decode_request(body, SEALER, stats)


def _request(assistant: dict) -> dict:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, **assistant},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
    }


CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


def test_litellm_thinking_blocks_become_anthropic_thinking_on_the_wire():
    stats = DecodeStats()
    request = decode(
        _request(
            {
                "tool_calls": [CALL],
                "thinking_blocks": [
                    {"type": "thinking", "thinking": "plan", "signature": "SIG"},
                    {"type": "redacted_thinking", "data": "REDACTED"},
                    {"type": "thinking", "thinking": "no signature"},
                ],
            }
        ),
        stats,
    )
    assert stats.ignored_tokens == 1
    blocks = request.messages[1].blocks
    assert [type(b) for b in blocks] == [Reasoning, Reasoning, ToolCall]
    assert blocks[0].meta.scope == ANY_ISSUER and blocks[0].meta.kind == "anthropic"
    adapter = get_adapter("anthropic")
    body = orjson.loads(
        adapter.encode_request(prepare(request, CLAUDE, adapter.capabilities).request, CLAUDE, "k").body
    )
    content = body["messages"][1]["content"]
    assert content[0] == {"type": "thinking", "thinking": "plan", "signature": "SIG"}
    assert content[1] == {"type": "redacted_thinking", "data": "REDACTED"}


def test_gemini_thought_signatures_in_both_echo_formats_reach_gemini_and_nobody_else():
    for carrier in (
        {"provider_specific_fields": {"thought_signature": "TS1"}},
        {"extra_content": {"google": {"thought_signature": "TS1"}}},
    ):
        request = decode(_request({"tool_calls": [{**CALL, **carrier}]}))
        adapter = get_adapter("gemini")
        body = orjson.loads(
            adapter.encode_request(prepare(request, GEMINI, adapter.capabilities).request, GEMINI, "k").body
        )
        part = body["contents"][1]["parts"][0]
        assert part["functionCall"]["name"] == "get_weather" and part["thoughtSignature"] == "TS1"
        claude = get_adapter("anthropic")
        wire = claude.encode_request(prepare(request, CLAUDE, claude.capabilities).request, CLAUDE, "k").body
        assert b"TS1" not in wire


def test_an_unusable_echoed_signature_is_counted_not_forwarded():
    stats = DecodeStats()
    request = decode(
        _request({"tool_calls": [{**CALL, "provider_specific_fields": {"thought_signature": 42}}]}), stats
    )
    assert stats.ignored_tokens == 1
    assert request.messages[1].blocks[0].meta is None
