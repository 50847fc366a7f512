"""Passes that resume a conversation's walk where the previous turn's ended
(gateway/transcript/resume.py) give exactly what a walk from the start gives, whatever was held
before: the conversation's first messages, a turn that went on differently, another target's walk
of the same messages."""

from __future__ import annotations

import gc
import importlib
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.ingress import admission
from gateway.providers import KINDS, get_adapter
from gateway.repair import empty_text, reasoning_policy, role_order, tool_ids, tool_pairing
from gateway.repair.empty_text import drop_empty_text
from gateway.repair.reasoning_policy import apply_reasoning_policy
from gateway.repair.tool_ids import project_tool_ids
from gateway.transcript import resume
from gateway.transcript.model import Message, Reasoning, Role, Text, ToolCall, ToolResult
from tests.property.test_rich_content import rich_requests
from tests.property.transcripts import requests, target_for
from tests.repair.test_holds import sparse_requests

holds_module = importlib.import_module("gateway.repair.holds")  # the package names the function
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _every_length(monkeypatch):
    monkeypatch.setattr(resume, "MIN_MESSAGES", 1)


def _project(messages, kind):
    return project_tool_ids(messages, target_for(kind), get_adapter(kind).capabilities.tool_ids)


def _check_projection(messages, kind: str, other: str, cut: int) -> None:
    tool_ids._SO_FAR.clear()
    want = _project(messages, kind)
    _project(messages, other)
    went_on = messages[:cut] + messages[cut:][::-1]
    assert _project(went_on, kind) == (tool_ids._SO_FAR.clear() or _project(went_on, kind))
    head = _project(messages[:cut], kind) if cut else None
    got = _project(messages, kind)
    assert got == want
    assert (got[0] is messages) == (want[0] is messages)
    if head is not None:  # the held part's results are the very objects of the turn before
        assert all(a is b for a, b in zip(head[0], got[0], strict=False))
    assert _project(messages, kind) == want


@SETTINGS
@given(st.data(), st.sampled_from(KINDS), st.sampled_from(KINDS), st.integers(0, 12))
def test_resumed_projection_is_the_whole_walks_on_agent_transcripts(data, kind, other, cut):
    messages = data.draw(requests(target_for(kind), False)).messages
    _check_projection(messages, kind, other, cut)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.sampled_from(KINDS), st.integers(0, 12))
def test_resumed_projection_is_the_whole_walks_on_rich_transcripts(data, kind, other, cut):
    messages = data.draw(rich_requests(target_for(kind))).messages
    _check_projection(messages, kind, other, cut)


def test_kimi_indexes_go_on_counting_from_the_held_turn():
    """Kimi's ids count every call of the conversation: a resumed walk numbers the new calls
    after the held ones, as a walk from the start does."""
    turn = []
    for n in range(3):
        turn += [
            Message(Role.ASSISTANT, (ToolCall(f"c{n}", "f", "{}"),)),
            Message(Role.TOOL, (ToolResult(f"c{n}", "r"),)),
        ]
    messages = (Message(Role.USER, (Text("q"),)), *turn)
    tool_ids._SO_FAR.clear()
    _project(messages[:3], "kimi")
    projected, ids, changed = _project(messages, "kimi")
    assert [b.id for m in projected for b in m.blocks if type(b) is ToolCall] == [
        "functions.f:0",
        "functions.f:1",
        "functions.f:2",
    ]
    assert changed == 3 and ids["functions.f:2"] == "c2"


def test_an_id_taken_in_the_held_turn_stays_taken():
    """A native id that an earlier call of the conversation already uses is not given again,
    also when that call is in the held part."""
    target = target_for("openai_chat")
    own = target.continuity({"native_id": "call_x"})
    messages = (
        Message(Role.USER, (Text("q"),)),
        Message(Role.ASSISTANT, (ToolCall("call_x", "f", "{}"),)),
        Message(Role.TOOL, (ToolResult("call_x", "r"),)),
        Message(Role.ASSISTANT, (ToolCall("call_y", "f", "{}", own),)),
        Message(Role.TOOL, (ToolResult("call_y", "r"),)),
    )
    tool_ids._SO_FAR.clear()
    want = _project(messages, "openai_chat")
    tool_ids._SO_FAR.clear()
    _project(messages[:3], "openai_chat")
    assert _project(messages, "openai_chat") == want
    assert [b.id for m in want[0] for b in m.blocks if type(b) is ToolCall] == ["call_x", "call_y"]


def _check_walks(messages, cut: int) -> None:
    """holds, the pairing pass's two checks (unique call ids, already paired) and role order's
    neighbouring roles."""
    checks = (
        (holds_module._SO_FAR, holds_module.holds),
        (tool_pairing._IDS_SO_FAR, tool_pairing._reuses_a_call_id),
        (tool_pairing._PAIRED_SO_FAR, tool_pairing.already_paired),
        (role_order._CODES_SO_FAR, role_order._role_codes),
        (admission._BLOCKS_SO_FAR, admission.message_blocks),  # check_size's count
    )
    assert admission.message_blocks(messages) == sum(len(m.blocks) for m in messages)
    for held, walk in checks:
        held.clear()
        want = walk(messages)
        walk(messages[:cut] + messages[cut:][::-1])
        walk(messages[:cut])
        assert walk(messages) == want
        assert walk(messages) == want


@SETTINGS
@given(st.data(), st.sampled_from(KINDS), st.integers(0, 12))
def test_resumed_checks_are_the_whole_walks_on_agent_transcripts(data, kind, cut):
    _check_walks(data.draw(requests(target_for(kind), False)).messages, cut)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.integers(0, 12))
def test_resumed_checks_are_the_whole_walks_on_rich_and_sparse_transcripts(data, kind, cut):
    target = target_for(kind)
    _check_walks(data.draw(rich_requests(target)).messages, cut)
    _check_walks(data.draw(sparse_requests(target)).messages, cut)


def test_a_call_left_open_by_the_held_turn_is_answered_in_the_next():
    opening = (Message(Role.USER, (Text("q"),)), Message(Role.ASSISTANT, (ToolCall("c", "f", "{}"),)))
    answered = (*opening, Message(Role.TOOL, (ToolResult("c", "r"),)))
    tool_pairing._PAIRED_SO_FAR.clear()
    assert not tool_pairing.already_paired(opening)  # held with the call pending
    assert tool_pairing.already_paired(answered)
    assert not tool_pairing.already_paired((*opening, Message(Role.USER, (Text("more"),))))


def _check_passes(messages, kind: str, other: str, strict: bool, cut: int) -> None:
    """The reasoning policy and the empty-text pass: result and report as from the start."""
    target, caps = target_for(kind), get_adapter(kind).capabilities
    other_caps = get_adapter(other).capabilities
    passes = (
        (reasoning_policy._SO_FAR, lambda m, t, c: apply_reasoning_policy(m, t, c, strict), lambda r: r[0]),
        (empty_text._SO_FAR, lambda m, t, c: drop_empty_text(m, c), lambda r: r),
    )
    for held, run, kept in passes:
        held.clear()
        want = run(messages, target, caps)
        run(messages, target_for(other), other_caps)
        run(messages[:cut] + messages[cut:][::-1], target, caps)
        run(messages[:cut], target, caps)
        got = run(messages, target, caps)
        assert got == want
        assert (kept(got) is messages) == (kept(want) is messages)
        assert run(messages, target, caps) == want


@SETTINGS
@given(st.data(), st.sampled_from(KINDS), st.sampled_from(KINDS), st.booleans(), st.integers(0, 12))
def test_resumed_passes_are_the_whole_walks_on_agent_transcripts(data, kind, other, strict, cut):
    _check_passes(data.draw(requests(target_for(kind), strict)).messages, kind, other, strict, cut)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.sampled_from(KINDS), st.booleans(), st.integers(0, 12))
def test_resumed_passes_are_the_whole_walks_on_rich_and_sparse_transcripts(data, kind, other, strict, cut):
    target = target_for(kind)
    _check_passes(data.draw(rich_requests(target)).messages, kind, other, strict, cut)
    _check_passes(data.draw(sparse_requests(target)).messages, kind, other, strict, cut)


def test_a_token_kept_in_the_held_turn_is_a_duplicate_in_the_next():
    target = target_for("anthropic")
    caps = get_adapter("anthropic").capabilities
    meta = target.continuity({"signature": "s"})
    first = Message(Role.ASSISTANT, (Reasoning("think", meta), Text("a")))
    again = Message(Role.ASSISTANT, (Reasoning("think", meta), ToolCall("c", "f", "{}")))
    messages = (Message(Role.USER, (Text("q"),)), first, Message(Role.USER, (Text("go"),)), again)
    reasoning_policy._SO_FAR.clear()
    apply_reasoning_policy(messages[:2], target, caps)
    out, repairs = apply_reasoning_policy(messages, target, caps)
    assert out[3].blocks == (ToolCall("c", "f", "{}"),) and [r.kind for r in repairs] == ["reasoning_dropped"]


def test_the_final_trim_is_not_held():
    """Anthropic's final assistant text loses its trailing whitespace; once the turn goes on, the
    same message is no longer final and keeps it."""
    caps = get_adapter("anthropic").capabilities
    last = Message(Role.ASSISTANT, (Text("done  "),))
    messages = (Message(Role.USER, (Text("q"),)), last)
    empty_text._SO_FAR.clear()
    assert drop_empty_text(messages, caps)[-1].blocks == (Text("done"),)
    longer = (*messages, Message(Role.USER, (Text("more"),)))
    assert drop_empty_text(longer, caps) is longer


def test_held_conversations_are_bounded_by_their_messages():
    held = resume.Resumable(messages=40)
    first = tuple(Message(Role.USER, (Text(f"a{n}"),)) for n in range(20))
    second = tuple(Message(Role.USER, (Text(f"b{n}"),)) for n in range(20))
    third = tuple(Message(Role.USER, (Text(f"c{n}"),)) for n in range(20))
    held.hold(first, None, "first")
    held.hold(second, None, "second")
    assert held.find(first, None) == (20, "first")
    held.hold(third, None, "third")  # the oldest conversation goes
    assert held.find(first, None) == (0, None)
    assert held.find((*second, *third), None) == (20, "second")
    held.hold(first + second + third, None, "too long")  # never held
    assert held.find(first + second + third, None) == (0, None)


def test_what_the_held_conversations_let_go_is_freed_when_released():
    resume.release_retired()
    held = resume.Resumable(messages=45)

    class State:  # a held state that says when it is freed
        pass

    states = [State() for _ in range(4)]
    alive = [weakref.ref(state) for state in states]
    conversations = [tuple(Message(Role.USER, (Text(f"{n}-{i}"),)) for i in range(20)) for n in range(3)]
    for conversation, state in zip(conversations, states, strict=False):
        held.hold(conversation, None, state)
    held.hold((*conversations[2], *conversations[2][:5]), None, states[3])  # the third's next turn
    del states, state
    gc.collect()
    # the first conversation went when the third came: retired, not freed on the way; what the
    # third held before its next turn is freed at once (that turn holds most of the same objects)
    assert [ref() is not None for ref in alive] == [True, True, False, True]
    resume.release_retired()
    assert [ref() is not None for ref in alive] == [False, True, False, True]


def test_retired_values_are_bounded_without_a_release():
    resume.release_retired()

    class Value:
        pass

    kept = [Value() for _ in range(resume.RETIRED_MAX)]
    alive = [weakref.ref(value) for value in kept[:1]]
    resume.retire(kept)
    del kept
    assert alive[0]() is not None  # within the bound: kept until released
    resume.retire([Value()])  # past it: everything retired is freed where it grows
    gc.collect()
    assert alive[0]() is None
    resume.release_retired()
