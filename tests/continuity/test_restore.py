from __future__ import annotations

from gateway.continuity.codec import decode_turn, encode_turn
from gateway.continuity.keys import call_key, text_key, turn_keys
from gateway.continuity.restore import lookup_keys, restore
from gateway.transcript.model import Continuity, Message, Reasoning, Request, Role, Text, ToolCall, ToolResult

SIG = Continuity("claude", "claude", "anthropic", "sonnet", {"signature": "s1"})
GEM = Continuity("gem", "gem", "gemini", "g3", {"thought_signature": "t", "native_id": "n1"})
TURN = (Reasoning("plan", SIG), Text("Checking."), ToolCall("call_A", "f", '{"x": 1, "y": 2}', GEM))


def test_codec_round_trips_blocks_with_meta_and_rejects_garbage():
    assert decode_turn(encode_turn(TURN)) == TURN
    assert decode_turn(b"not json") is None
    assert decode_turn(b"[99, []]") is None


def test_keys_are_call_ids_for_tool_turns_and_session_text_hash_otherwise():
    assert turn_keys(TURN, "s", 0) == [call_key("call_A")]
    assert turn_keys((Text("  Hello   world "),), "s", 2) == [text_key("s", 2, "Hello world")]
    assert turn_keys((Reasoning("only thinking"),), "s", 0) == []


def _request(assistant_blocks) -> Request:
    return Request(
        "m",
        (
            Message(Role.USER, (Text("hi"),)),
            Message(Role.ASSISTANT, assistant_blocks),
            Message(Role.TOOL, (ToolResult("call_A", "ok"),)),
        ),
    )


def test_a_stripped_turn_gets_its_recorded_blocks_back():
    stripped = (Text("Checking."), ToolCall("call_A", "f", '{"y":2,"x":1}'))  # client reformatted args
    request = _request(stripped)
    assert lookup_keys(request, "s") == ["call:call_A"]
    restored, repairs = restore(request, {"call:call_A": encode_turn(TURN)}, "s")
    assert restored.messages[1].blocks == TURN
    assert [r.kind for r in repairs] == ["continuity_restored"]
    assert request.messages[1].blocks == stripped, "input untouched"


def test_an_edited_turn_keeps_the_clients_content_and_loses_its_tokens():
    edited = (Text("Checking again."), ToolCall("call_A", "f", '{"x": 1, "y": 2}'))
    request = _request(edited)
    restored, repairs = restore(request, {"call:call_A": encode_turn(TURN)}, "s")
    assert restored is request and repairs == []
    args_edited = _request((Text("Checking."), ToolCall("call_A", "f", '{"x": 9, "y": 2}')))
    assert restore(args_edited, {"call:call_A": encode_turn(TURN)}, "s")[0] is args_edited


def test_misses_and_identical_turns_change_nothing():
    request = _request(TURN)
    assert restore(request, {}, "s") == (request, [])
    assert restore(request, {"call:call_A": encode_turn(TURN)}, "s") == (request, [])


def test_text_only_turns_are_found_by_session_and_text():
    stored = (Reasoning("why", SIG), Text("Hello there"))
    request = Request(
        "m", (Message(Role.USER, (Text("hi"),)), Message(Role.ASSISTANT, (Text("Hello there "),)))
    )
    key = text_key("sess", 0, "Hello there")
    assert lookup_keys(request, "sess") == [key]
    assert restore(request, {key: encode_turn(stored)}, "sess")[0].messages[1].blocks == stored
    assert restore(request, {key: encode_turn(stored)}, "other-session")[0] is request


def test_the_same_reply_twice_gets_each_turns_own_tokens():
    first = (Reasoning("one", SIG), Text("Sure."))
    second = (Reasoning("two", SIG), Text("Sure."))
    user = Message(Role.USER, (Text("again"),))
    request = Request(
        "m",
        (
            user,
            Message(Role.ASSISTANT, (Text("Sure."),)),
            user,
            Message(Role.ASSISTANT, (Text("Sure."),)),
            user,
        ),
    )
    records = {text_key("s", 0, "Sure."): encode_turn(first), text_key("s", 1, "Sure."): encode_turn(second)}
    restored, repairs = restore(request, records, "s")
    assert restored.messages[1].blocks == first and restored.messages[3].blocks == second
    assert len(repairs) == 2


def test_a_record_is_compared_once_per_client_copy_and_again_for_another(monkeypatch):
    """An agent re-sends the same client copy every turn (the decode memo hands back the same
    blocks): the record's comparison with it is made once; another copy (an edit, equal or not)
    is compared afresh, and the verdicts are those of a fresh comparison."""
    from gateway.continuity import restore as restore_module

    compared: list[int] = []
    real = restore_module.visible

    def counted(blocks):
        compared.append(1)
        return real(blocks)

    monkeypatch.setattr(restore_module, "visible", counted)
    record = {"call:call_A": encode_turn(TURN)}
    stripped = _request((Text("Checking."), ToolCall("call_A", "f", '{"y":2,"x":1}')))
    for _ in range(3):
        assert restore(stripped, record, "s")[0].messages[1].blocks == TURN
    assert len(compared) == 2  # the record's and the client's visible content, once
    edited = _request((Text("Checking again."), ToolCall("call_A", "f", '{"x": 1, "y": 2}')))
    assert restore(edited, record, "s") == (edited, [])
    # an equal copy that is another object: compared afresh, the same verdict
    again = _request((Text("Checking."), ToolCall("call_A", "f", '{"y":2,"x":1}')))
    assert restore(again, record, "s")[0].messages[1].blocks == TURN
    assert restore(stripped, record, "s")[0].messages[1].blocks == TURN
    assert len(compared) == 8
