"""The simulators' rules for rich content: each family refuses what its API refuses (an image its
model cannot read, a media type or size it does not take, another issuer's server-tool data)."""

from __future__ import annotations

from gateway.simulators.anthropic_rules import search_result_content
from gateway.simulators.base import SimulatorState
from gateway.simulators.registry import VALIDATORS
from tests.property.transcripts import PNG

URL = "https://w.example"


def anthropic_body(*blocks: dict) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": list(blocks)},
            {"role": "user", "content": "more"},
        ],
    }


def test_anthropic_checks_server_tool_history():
    state = SimulatorState("anthropic")
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    page = {
        "type": "web_search_result",
        "url": URL,
        "title": "W",
        "encrypted_content": search_result_content(state, URL),
    }
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [page]}
    check = VALIDATORS["anthropic"]
    assert (
        check(state, anthropic_body(use, result, {"type": "text", "text": "ok"}), "claude-sonnet-4-5") is None
    )
    forged = {**result, "content": [{**page, "encrypted_content": "forged"}]}
    rejection = check(state, anthropic_body(use, forged), "claude-sonnet-4-5")
    assert rejection is not None and "encrypted_content" in rejection.message
    rejection = check(state, anthropic_body(result, use), "claude-sonnet-4-5")
    assert rejection is not None and "must follow its `server_tool_use`" in rejection.message


def test_anthropic_refuses_an_image_over_5_mb():
    state = SimulatorState("anthropic")
    big = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "A" * (7 * 1024 * 1024)},
    }
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [big]}]}
    rejection = VALIDATORS["anthropic"](state, body, "claude-sonnet-4-5")
    assert rejection is not None and "image exceeds 5 MB maximum" in rejection.message


def test_gemini_refuses_an_image_type_it_does_not_read():
    state = SimulatorState("gemini")
    gif = {"inlineData": {"mimeType": "image/gif", "data": "R0lGODlh"}}
    body = {"contents": [{"role": "user", "parts": [{"text": "q"}, gif]}]}
    rejection = VALIDATORS["gemini"](state, body, "gemini-2.5-flash")
    assert rejection is not None and rejection.message == "Unsupported MIME type: image/gif"
    png = {"inlineData": {"mimeType": "image/png", "data": PNG.split(",")[1]}}
    assert (
        VALIDATORS["gemini"](state, {"contents": [{"role": "user", "parts": [png]}]}, "gemini-2.5-flash")
        is None
    )


def test_kimi_text_models_refuse_images():
    state = SimulatorState("kimi")
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "q"}, {"type": "image_url", "image_url": {"url": PNG}}],
    }
    body = {"model": "kimi-k2-thinking", "messages": [message]}
    rejection = VALIDATORS["kimi"](state, body, "kimi-k2-thinking")
    assert rejection is not None and "does not support image input" in rejection.message
    assert VALIDATORS["kimi"](state, {**body, "model": "kimi-k2.5"}, "kimi-k2.5") is None


def test_responses_takes_web_search_items_and_annotations():
    state = SimulatorState("openai_responses")
    item = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    note = {"type": "url_citation", "url": URL, "title": "W", "start_index": 0, "end_index": 2}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok", "annotations": [note]}],
    }
    body = {
        "model": "gpt-5",
        "store": False,
        "input": [{"role": "user", "content": "q"}, item, answer, {"role": "user", "content": "more"}],
    }
    assert VALIDATORS["openai_responses"](state, body, "gpt-5") is None
    bad = {
        **answer,
        "content": [{"type": "output_text", "text": "ok", "annotations": [{"type": "footnote"}]}],
    }
    rejection = VALIDATORS["openai_responses"](state, {**body, "input": [body["input"][0], bad]}, "gpt-5")
    assert rejection is not None and "annotations[0].type" in (rejection.param or rejection.message)
