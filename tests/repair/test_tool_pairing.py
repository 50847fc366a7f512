from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from gateway.repair.tool_pairing import (
    SYNTHETIC_RESULT_TEXT,
    already_paired,
    pair_in_general,
    pair_tool_results,
    synthetic_result,
    unique_call_ids,
)
from gateway.transcript.model import Continuity, Image, ToolCall, ToolResult
from tests.property.transcripts import requests, target_for
from tests.repair.helpers import assistant, call, kinds, result, tool, user

NATIVE = Continuity("p", "p", "anthropic", "m", {"native_id": "toolu_1"})


def test_paired_results_in_place_come_back_as_the_same_object():
    # the chat ingress gives one tool message per result, in any order: that is in place
    messages = (
        user("hi"),
        assistant(call("a"), call("b")),
        tool(result("b")),
        tool(result("a")),
        assistant("done"),
    )
    assert already_paired(messages)  # the one-scan shortcut takes it
    out, repairs = pair_tool_results(messages)
    assert out is messages and repairs == []
    assert pair_in_general(messages) == (messages, [])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests(target_for("anthropic"), False))
def test_the_shortcut_agrees_with_the_general_pass(request):
    messages, _ = unique_call_ids(request.messages)
    out, repairs = pair_tool_results(messages)
    assert (out, repairs) == pair_in_general(messages)
    if already_paired(messages):
        assert out is messages and repairs == []


def test_the_shortcut_declines_what_the_general_pass_must_repair():
    for messages in (
        (user("go"), assistant(call("a")), user("next")),  # unanswered
        (user("go"), assistant(call("a")), tool(result("a")), tool(result("a"))),  # answered twice
        (user("go"), tool(result("x"))),  # an orphan
        (user("go"), assistant(call("a"), call("b")), tool(result("a")), assistant("?"), tool(result("b"))),
        (user("go", result("a")), assistant(call("a"))),  # a result before its call
    ):
        assert not already_paired(messages)
        assert pair_tool_results(messages) == pair_in_general(messages)
        assert pair_tool_results(messages)[1]  # and it did repair something


def test_missing_results_are_synthesized_as_cancelled_errors_in_call_order():
    messages = (user("go"), assistant(call("c1"), call("c2"), call("c3")), tool(result("c2")), user("next"))
    out, repairs = pair_tool_results(messages)
    assert out == (
        user("go"),
        assistant(call("c1"), call("c2"), call("c3")),
        tool(synthetic_result("c1"), result("c2"), synthetic_result("c3")),
        user("next"),
    )
    assert kinds(repairs) == ["synthetic_tool_result", "synthetic_tool_result"]
    synthetic = out[2].blocks[0]
    assert synthetic.is_error and "cancelled" in synthetic.content and synthetic.synthetic


def test_a_call_at_the_end_of_the_transcript_is_closed():
    out, repairs = pair_tool_results((user("go"), assistant("let me look", call("c1"))))
    assert out[-1] == tool(synthetic_result("c1"))
    assert kinds(repairs) == ["synthetic_tool_result"]


def test_orphan_results_are_dropped_and_so_is_a_result_before_its_call():
    messages = (
        user("go"),
        tool(result("ghost")),
        tool(result("c1", "too early")),
        assistant(call("c1")),
        tool(result("c1"), result("other")),
    )
    out, repairs = pair_tool_results(messages)
    assert out == (user("go"), assistant(call("c1")), tool(result("c1")))
    assert kinds(repairs) == ["orphan_tool_result_dropped"] * 3


def test_duplicates_keep_the_first_real_result_and_a_synthetic_never_wins():
    messages = (
        user("go"),
        assistant(call("a"), call("b")),
        tool(synthetic_result("a"), result("b", "first b")),
        tool(result("b", "second b")),
        user("later"),
        tool(result("a", "real a, late")),
    )
    out, repairs = pair_tool_results(messages)
    assert out == (
        user("go"),
        assistant(call("a"), call("b")),
        tool(result("a", "real a, late"), result("b", "first b")),
        user("later"),
    )
    assert kinds(repairs) == [
        "duplicate_tool_result_dropped",
        "duplicate_tool_result_dropped",
        "tool_result_moved",
    ]


def test_a_user_message_between_calls_and_results_moves_after_the_results():
    messages = (user("go"), assistant(call("a")), user("hurry up"), tool(result("a")))
    out, repairs = pair_tool_results(messages)
    assert out == (user("go"), assistant(call("a")), tool(result("a")), user("hurry up"))
    assert kinds(repairs) == ["tool_result_moved"]


def test_results_inside_a_user_message_or_after_a_later_turn_are_moved_to_their_calls():
    image = Image("https://x/y.png")
    messages = (
        user("go"),
        assistant(call("a")),
        assistant(call("b")),
        user(result("a"), "and here is b:", image),
        tool(result("b")),
    )
    out, repairs = pair_tool_results(messages)
    assert out == (
        user("go"),
        assistant(call("a")),
        tool(result("a")),
        assistant(call("b")),
        tool(result("b")),
        user("and here is b:", image),
    )
    assert kinds(repairs) == ["tool_result_moved", "tool_result_moved"]


def test_only_the_seed_002_fan_out_is_rebuilt_and_the_real_result_keeps_its_content():
    fan_out = [call(f"hist_tool_{n}") for n in range(2, 7)]
    messages = (
        user("weather?"),
        assistant(call("hist_tool_1")),
        tool(result("hist_tool_1")),
        assistant(*fan_out),
        tool(result("hist_tool_3", "rain")),
        assistant("long answer"),
    )
    out, repairs = pair_tool_results(messages)
    assert out[:3] == messages[:3], "a complete pair stays as it was"
    assert out[4] == tool(
        synthetic_result("hist_tool_2"),
        result("hist_tool_3", "rain"),
        *(synthetic_result(f"hist_tool_{n}") for n in (4, 5, 6)),
    )
    assert out[5] == messages[5]
    assert kinds(repairs) == ["synthetic_tool_result"] * 4


def test_a_reused_call_id_is_renamed_with_the_results_that_follow_it():
    messages = (
        user("go"),
        assistant(call("a")),
        tool(result("a", "first")),
        assistant(ToolCall("a", "f", "{}", NATIVE), call("a_2")),
        tool(result("a", "second"), result("a_2")),
    )
    out, repairs = unique_call_ids(messages)
    assert out[3].blocks[0].id == "a_3", "the first free suffix; a_2 is taken"
    assert out[3].blocks[0].meta is None, "the renamed call is no longer the one its native id named"
    assert [r.call_id for r in out[4].blocks] == ["a_3", "a_2"]
    assert out[2] == messages[2]
    assert kinds(repairs) == ["tool_id_projected"]
    assert unique_call_ids(out) == (out, [])


def test_unique_ids_come_back_as_the_same_object():
    messages = (user("go"), assistant(call("a"), call("b")), tool(result("a"), result("b")))
    assert unique_call_ids(messages)[0] is messages


def test_pairing_is_idempotent_and_does_not_mutate():
    messages = (user("go"), assistant(call("a"), call("b")), user("?"), tool(result("b")), tool(result("x")))
    snapshot = repr(messages)
    out, _ = pair_tool_results(messages)
    assert repr(messages) == snapshot
    again, repairs = pair_tool_results(out)
    assert again is out and repairs == []


def test_a_synthetic_result_is_known_by_its_tag_never_by_its_text():
    assert synthetic_result("a").synthetic
    # a client's own result with the very same words is the client's: it wins over a synthetic
    # one and a later duplicate of it is dropped
    theirs = ToolResult("a", SYNTHETIC_RESULT_TEXT, is_error=True)
    later = ToolResult("a", "the real answer")
    out, repairs = pair_tool_results((user("go"), assistant(call("a")), tool(theirs), tool(later)))
    assert out == (user("go"), assistant(call("a")), tool(theirs))
    assert kinds(repairs) == ["duplicate_tool_result_dropped"]
    out, _ = pair_tool_results((user("go"), assistant(call("a")), tool(synthetic_result("a")), tool(later)))
    assert out[2:] == (tool(later),)
