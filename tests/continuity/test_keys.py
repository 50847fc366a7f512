"""The keys restore looks turns up by are the keys the recorder records them under: `keyed`'s
inline reading of a text turn (`text_turn_key`) against `lookup_key`, the general one."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.continuity import restore
from gateway.continuity.keys import lookup_key, text_key_prefix, text_turn_key, turn_keys
from gateway.providers import KINDS
from gateway.transcript.model import Reasoning, Role, Text, ToolCall
from tests.property.transcripts import requests, target_for

# whitespace of every kind `str.split` and `str.strip` know, around words and alone
_TEXT = st.lists(
    st.sampled_from(["", " ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "a", "ok", "Done.", "é", "😀"]),
    max_size=6,
).map("".join)
_BLOCK = st.one_of(
    _TEXT.map(Text),
    _TEXT.map(lambda t: Reasoning(t)),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_BLOCK, max_size=4).map(tuple),
    st.integers(0, 40),
    st.sampled_from(["s1", "sess_x"]),
    st.sampled_from(["", "t1"]),
)
def test_a_text_turns_key_is_lookup_keys(blocks, position, session, tenant):
    want = lookup_key(blocks, session, position, tenant)
    assert text_turn_key(text_key_prefix(session, tenant), position, blocks) == want
    # and the recorder records the turn under it
    assert turn_keys(blocks, session, position, tenant) == ([] if want is None else [want])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.sampled_from(["", "t1"]))
def test_message_keys_are_lookup_keys_in_order(data, kind, tenant):
    request = data.draw(requests(target_for(kind), False))
    restore._KEYS_SO_FAR.clear()
    assistants = [m for m in request.messages if m.role is Role.ASSISTANT]
    want = tuple(lookup_key(m.blocks, "s1", n, tenant) for n, m in enumerate(assistants))
    keys, distinct = restore.keyed(request, "s1", tenant)
    assert keys == want
    assert list(distinct) == list(dict.fromkeys(k for k in want if k is not None))


def test_a_call_turn_is_found_by_its_first_call():
    blocks = (Text("looking"), ToolCall("call_1", "f", "{}"), ToolCall("call_2", "g", "{}"))
    assert text_turn_key(text_key_prefix("s"), 0, (Text("looking"),)) is not None
    assert lookup_key(blocks, "s", 0) == "call:call_1"
