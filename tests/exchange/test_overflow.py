"""A context-window overflow on any family reaches each client in its own dialect's overflow form
(Claude Code compacts on Anthropic's `prompt is too long: N tokens > M maximum`, Codex and the
OpenAI SDKs' users on `context_length_exceeded`), never as a 413 or a 5xx, and never counts
against the target's health; a group's `overflow_target` serves the request instead."""

from __future__ import annotations

import re

import orjson
import pytest

from gateway.demo import FAMILIES
from tests.ops.conftest import running_stack

LONG = "Tell me about the weather in Paris. " * 40  # ~1.4 kB: over a 100-token window
# Claude Code compacts when the message holds "prompt is too long" and reads the figures with
# /prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)/i when they are there (its cli bundle)
CLAUDE_OVERFLOW = re.compile(r"^prompt is too long: (\d+) tokens > (\d+) maximum")
# the Responses API names neither figure: the gateway adds its estimate of the size only
NO_LIMIT = {"openai_responses"}
FAMILY_KINDS = [(name, kind) for name, kind, _, _ in FAMILIES]


def _bodies(model: str) -> dict[str, tuple[str, dict, dict]]:
    return {
        "messages": (
            "/v1/messages",
            {"anthropic-version": "2023-06-01"},
            {"model": model, "max_tokens": 256, "messages": [{"role": "user", "content": LONG}]},
        ),
        "chat": (
            "/v1/chat/completions",
            {},
            {"model": model, "messages": [{"role": "user", "content": LONG}]},
        ),
        "responses": ("/v1/responses", {}, {"model": model, "input": LONG, "stream": True}),
    }


@pytest.mark.parametrize(("family", "kind"), FAMILY_KINDS)
async def test_an_overflow_is_each_clients_own_overflow_error(family, kind):
    async with running_stack() as stack:
        state = stack.hub.states[kind]
        state.context_window = 100
        for dialect, (path, headers, body) in _bodies(family).items():
            status, _, payload = await stack.chat(body, headers, path=path)
            assert status == 400, (dialect, payload)
            error = orjson.loads(payload)
            if dialect == "messages":
                assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
                message = error["error"]["message"]
                assert message.startswith("prompt is too long"), error
                match = CLAUDE_OVERFLOW.match(message)
                if kind in NO_LIMIT:
                    assert match is None and "tokens by the gateway's estimate" in message
                else:  # Kimi names only the limit: the used count is the gateway's estimate
                    assert match is not None, error
                    assert int(match[1]) > int(match[2]) == 100
            else:
                assert error["error"]["code"] == "context_length_exceeded", error
                assert error["error"]["type"] == "invalid_request_error"
                assert "maximum context length" in error["error"]["message"]
        assert len(state.rejections) == 3
        # the request was at fault, not the target: it still serves what fits
        state.context_window = None
        for _ in range(3):
            path, headers, body = _bodies(family)["chat"]
            status, _, payload = await stack.chat(body, headers, path=path)
            assert status == 200, payload


async def test_an_overflow_goes_to_the_groups_larger_context_target():
    def overflow_target(data):
        data["models"]["small"] = {
            "targets": [{"provider": "openai-chat", "model": "gpt-4.1"}],
            "overflow_target": {"provider": "claude", "model": "claude-sonnet-4-5"},
        }

    async with running_stack(overflow_target) as stack:
        stack.hub.states["openai_chat"].context_window = 100
        path, headers, body = _bodies("small")["chat"]
        status, answer_headers, payload = await stack.chat(body, headers, path=path)
        assert status == 200, payload
        assert answer_headers["X-Gateway-Provider"] == "claude"
        assert answer_headers["X-Gateway-Attempts"] == "2"
        assert len(stack.hub.states["anthropic"].requests) == 1
        # the larger target overflows too: the client hears it in its own form
        stack.hub.states["anthropic"].context_window = 100
        path, headers, body = _bodies("small")["messages"]
        status, _, payload = await stack.chat(body, headers, path=path)
        assert status == 400 and CLAUDE_OVERFLOW.match(orjson.loads(payload)["error"]["message"])
