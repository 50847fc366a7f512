"""Continuity in `encrypted_content`: OpenAI's own reasoning in its own layout (kept in step with
gateway.providers.openai_responses), every other issuer's sealed, text and call continuity in the
turn's carrier, forged tokens dropped and counted."""

from __future__ import annotations

import orjson

from gateway.ingress.responses.codec import CODEC
from gateway.ingress.responses.output import Answering, output_items
from gateway.ingress.responses.tokens import apply_carrier, carrier_token, compaction_token
from gateway.ingress.responses.tools import ToolNames
from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.transcript.model import Continuity, Message, Reasoning, Role, Text, ToolCall
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

SEALER = Sealer(b"t" * 32)
OPENAI = Target("openai", "openai_responses", "gpt-5", "http://sim.invalid")
NATIVE = OPENAI.continuity({"id": "rs_abc", "encrypted_content": "gAAAA-opaque", "summary": ["Plan", "Act"]})
CLAUDE = Continuity("claude", "claude", "anthropic", "claude-sonnet-4-5", {"signature": "sig=="})
GEMINI = Continuity("gem", "gem", "gemini", "gemini-3-pro-preview", {"thought_signature": "ts=="})
ANSWERING = Answering({}, ToolNames(), summaries=True, encrypted=True)


def decode_items(items: list[dict]):
    return CODEC.decode({"model": "m", "input": [{"role": "user", "content": "hi"}, *items]}, {}, SEALER)


def test_openai_reasoning_goes_out_as_openai_issued_it_and_back_to_openai_targets():
    items = output_items(
        [Reasoning("Plan\n\nAct", NATIVE), Text("Done.")], "x", ANSWERING, SEALER, "completed"
    )
    assert items[0]["id"] == "rs_abc" and items[0]["encrypted_content"] == "gAAAA-opaque"
    assert [p["text"] for p in items[0]["summary"]] == ["Plan", "Act"]
    request = decode_items(items).request
    # the echo names no issuer scope: it is offered to any OpenAI Responses target as it is
    prepared = prepare(request, OPENAI, get_adapter("openai_responses").capabilities)
    body = orjson.loads(get_adapter("openai_responses").encode_request(prepared.request, OPENAI, "k").body)
    replayed = next(i for i in body["input"] if i.get("type") == "reasoning")
    assert replayed == {
        "type": "reasoning",
        "id": "rs_abc",
        "summary": [{"type": "summary_text", "text": "Plan"}, {"type": "summary_text", "text": "Act"}],
        "encrypted_content": "gAAAA-opaque",
    }


def test_other_issuers_are_sealed_and_restored_exactly():
    blocks = [
        Reasoning("Thinking.", CLAUDE),
        Text("Calling."),
        ToolCall("call_1", "f", "{}", GEMINI),
        Text("", GEMINI),
    ]
    items = output_items(blocks, "x", ANSWERING, SEALER, "completed")
    assert "sig==" not in orjson.dumps(items).decode()  # sealed, not readable
    assert items[-1]["type"] == "reasoning" and items[-1]["summary"] == []  # the carrier
    inbound = decode_items(items)
    assert inbound.request.messages[1].blocks == tuple(blocks)
    assert inbound.ignored_tokens == 0


def test_a_foreign_sealed_token_never_reaches_openai():
    items = output_items([Reasoning("Thinking.", CLAUDE), Text("Hi.")], "x", ANSWERING, SEALER, "completed")
    request = decode_items(items).request
    prepared = prepare(request, OPENAI, get_adapter("openai_responses").capabilities)
    body = get_adapter("openai_responses").encode_request(prepared.request, OPENAI, "k").body
    assert b"gw1." not in body and b"reasoning" not in body.split(b'"input"')[1]


def test_forged_or_foreign_deployment_tokens_are_dropped_and_counted():
    other = Sealer(b"o" * 32)
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": other.seal(CLAUDE)},
        {
            "type": "reasoning",
            "id": "rs_2",
            "summary": [{"type": "summary_text", "text": "kept as text"}],
            "encrypted_content": "gw1.forged",
        },
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-openai-compaction"},
    ]
    inbound = decode_items(items)
    assert inbound.ignored_tokens == 3
    assert inbound.request.messages[1].blocks == (Reasoning("kept as text"), Text("Hi."))


def test_a_carrier_applies_to_its_own_turn_only():
    turn = [Text("a", GEMINI), ToolCall("call_1", "f", "{}", CLAUDE)]
    token = carrier_token(turn, SEALER)
    data = SEALER.unseal(token).data
    assert apply_carrier([Text("a"), ToolCall("call_1", "f", "{}")], data) == turn
    # a block that already has meta keeps it; unknown ids are ignored
    assert apply_carrier([Text("a", CLAUDE), ToolCall("call_9", "f", "{}")], data) == [
        Text("a", CLAUDE),
        ToolCall("call_9", "f", "{}"),
    ]
    first = output_items([Text("one", GEMINI)], "a", ANSWERING, SEALER, "completed")
    second = output_items([Text("two", CLAUDE)], "b", ANSWERING, SEALER, "completed")
    messages = decode_items([*first, *second]).request.messages
    assert messages[1:] == (
        Message(Role.ASSISTANT, (Text("one", GEMINI),)),
        Message(Role.ASSISTANT, (Text("two", CLAUDE),)),
    )


def test_a_compaction_item_puts_its_summary_back():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": compaction_token("We did X.", SEALER)}
    messages = decode_items([item]).request.messages
    assert messages[1].role is Role.USER and messages[1].text().endswith("We did X.")


def test_without_include_no_token_leaves():
    plain = Answering({}, ToolNames(), summaries=False, encrypted=False)
    items = output_items(
        [Reasoning("Thinking.", CLAUDE), ToolCall("call_1", "f", "{}", GEMINI)],
        "x",
        plain,
        SEALER,
        "completed",
    )
    assert "encrypted_content" not in orjson.dumps(items).decode()
    assert items[0]["content"] == [{"type": "reasoning_text", "text": "Thinking."}]
    assert len(items) == 2  # no carrier
