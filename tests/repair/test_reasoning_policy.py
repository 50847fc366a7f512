from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from gateway.repair.reasoning_policy import apply_reasoning_policy
from gateway.transcript.model import (
    NATIVE_ID,
    Continuity,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
    replace,
)
from gateway.transcript.target import Capabilities, Target, ToolIdRule

CAPS = Capabilities(ToolIdRule(".*", 64, "prefixed", "call_"), reasoning_replay=True)
CLAUDE = Target("claude", "anthropic", "sonnet", "http://x")
OWN = Continuity("claude", "claude", "anthropic", "sonnet", {"signature": "s"})
OTHER_MODEL = Continuity("claude", "claude", "anthropic", "opus", {"signature": "s"})
GEMINI = Continuity("gem", "gem", "gemini", "g3", {"thought_signature": "t"})


def test_own_reasoning_is_kept_and_foreign_reasoning_dropped_and_counted():
    messages = (
        Message(Role.ASSISTANT, (Reasoning("mine", OWN), Text("a"))),
        Message(Role.ASSISTANT, (Reasoning("other model", OTHER_MODEL), Reasoning("gem", GEMINI), Text("b"))),
    )
    out, repairs = apply_reasoning_policy(messages, CLAUDE, CAPS)
    assert out == (messages[0], Message(Role.ASSISTANT, (Text("b"),)))
    assert [r.kind for r in repairs] == ["reasoning_dropped", "reasoning_dropped"]


def test_as_text_policy_keeps_foreign_reasoning_readable():
    messages = (Message(Role.ASSISTANT, (Reasoning("gem thoughts", GEMINI), Text("b"))),)
    out, repairs = apply_reasoning_policy(
        messages, dataclasses.replace(CLAUDE, reasoning_policy="as_text"), CAPS
    )
    assert out == (Message(Role.ASSISTANT, (Text("gem thoughts"), Text("b"))),)
    assert [r.kind for r in repairs] == ["reasoning_as_text"]


def test_foreign_meta_on_calls_and_text_is_removed_and_empty_signature_parts_vanish():
    messages = (
        Message(Role.ASSISTANT, (Text("x", GEMINI), Text("", GEMINI), ToolCall("c", "f", "{}", GEMINI))),
    )
    out, repairs = apply_reasoning_policy(messages, CLAUDE, CAPS)
    assert out == (Message(Role.ASSISTANT, (Text("x"), ToolCall("c", "f", "{}"))),)
    assert repairs == []


def test_a_provider_without_reasoning_replay_gets_none_and_valid_input_is_returned_as_is():
    messages = (Message(Role.ASSISTANT, (Reasoning("mine", OWN), Text("a"))),)
    out, _ = apply_reasoning_policy(messages, CLAUDE, dataclasses.replace(CAPS, reasoning_replay=False))
    assert out == (Message(Role.ASSISTANT, (Text("a"),)),)
    plain = (Message(Role.ASSISTANT, (Text("a"),)),)
    assert apply_reasoning_policy(plain, CLAUDE, CAPS)[0] is plain


def test_the_same_token_twice_is_kept_once_and_never_rendered_as_text():
    first = Message(Role.ASSISTANT, (Reasoning("mine", OWN), Text("a")))
    messages = (first, first)
    target = dataclasses.replace(CLAUDE, reasoning_policy="as_text")
    out, repairs = apply_reasoning_policy(messages, target, CAPS)
    assert out == (first, Message(Role.ASSISTANT, (Text("a"),)))
    assert [(r.kind, r.detail) for r in repairs] == [("reasoning_dropped", "token replayed twice")]


def test_reasoning_as_text_voids_a_text_signature_of_the_same_message():
    gem = Target("gem", "gemini", "g3", "http://x")
    seal = Text("", gem.continuity({"thought_signature": "t"}))
    messages = (Message(Role.ASSISTANT, (Reasoning("foreign", OWN), Text("answer"), seal)),)
    out, repairs = apply_reasoning_policy(
        messages, dataclasses.replace(gem, reasoning_policy="as_text"), CAPS
    )
    assert out == (Message(Role.ASSISTANT, (Text("foreign"), Text("answer"), Text(""))),)
    assert sorted(r.kind for r in repairs) == ["reasoning_as_text", "reasoning_dropped"]


def test_strict_mode_replays_no_token_but_keeps_what_carries_none():
    stub = Reasoning("", CLAUDE.continuity({}))
    placeholder = {"thought_signature": "PLACEHOLDER"}
    caps = dataclasses.replace(
        CAPS, thought_signature_key="thought_signature", thought_signature_placeholder="PLACEHOLDER"
    )
    signed = ToolCall(
        "c", "f", "{}", CLAUDE.continuity({NATIVE_ID: "n1", "thought_signature": "real", "item_id": "fc_1"})
    )
    held = ToolCall("d", "f", "{}", CLAUDE.continuity({NATIVE_ID: "n2", **placeholder}))
    messages = (Message(Role.ASSISTANT, (Reasoning("mine", OWN), stub, Text("x", OWN), signed, held)),)
    out, repairs = apply_reasoning_policy(messages, CLAUDE, caps, strict=True)
    assert out == (
        Message(
            Role.ASSISTANT,
            (stub, Text("x"), replace(signed, meta=CLAUDE.continuity({NATIVE_ID: "n1"})), held),
        ),
    )
    assert [r.kind for r in repairs] == ["reasoning_dropped"]
    assert apply_reasoning_policy(out, CLAUDE, caps, strict=True) == (out, [])


_MARK = ToolResult("mark", "passed through")  # an assistant's result block: the walk keeps it as it is
_REASONING = [Reasoning("r"), Reasoning("r", OWN), Reasoning("g", GEMINI)]
_CALLS = [ToolCall("c", "f", "{}"), ToolCall("c", "f", "{}", GEMINI), ToolCall("c", "f", "{}", OWN)]
_BLOCKS = st.sampled_from([*_REASONING, *_CALLS, Text("t"), Text("t", GEMINI)])
_MESSAGES = st.lists(
    st.one_of(
        # a reasoning block and a call (the short way's shape, its meta or not), other blocks
        st.tuples(st.sampled_from(_REASONING), st.sampled_from(_CALLS)),
        st.lists(_BLOCKS, min_size=1, max_size=3),
    ).map(lambda blocks: Message(Role.ASSISTANT, tuple(blocks)))
    | st.just(Message(Role.USER, (Text("u"),))),
    max_size=8,
)


@given(_MESSAGES, st.sampled_from(["drop", "as_text"]), st.booleans(), st.booleans())
def test_an_agents_reasoning_and_call_turn_comes_out_as_the_walk_of_its_blocks_makes_it(
    messages, policy, strict, replay
):
    """A reasoning-and-call turn is made without the block walk; the walk's outcome for the same
    blocks is read from the turn with a result block after them (which the walk keeps as it is,
    and which takes the turn off the short way)."""
    target = dataclasses.replace(CLAUDE, reasoning_policy=policy)
    caps = dataclasses.replace(CAPS, reasoning_replay=replay)
    out, repairs = apply_reasoning_policy(tuple(messages), target, caps, strict)
    marked = tuple(Message(m.role, (*m.blocks, _MARK)) if m.role is Role.ASSISTANT else m for m in messages)
    walked, walked_repairs = apply_reasoning_policy(marked, target, caps, strict)
    unmarked = [Message(m.role, tuple(b for b in m.blocks if b is not _MARK)) for m in walked]
    assert out == tuple(m for m in unmarked if m.blocks)
    assert repairs == walked_repairs
