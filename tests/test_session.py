"""Derived session keys are kept by the texts they came from (gateway/session.py): whatever the
requests, their order, repeats and the memo's bound, each key is the digest of its opening, as
derived without the memo (the reference below is the derivation as written before it)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import session
from gateway.bounded_cache import BoundedCache
from gateway.session import derive_session_key
from gateway.transcript.model import Message, Request, Role, Text, ToolCall


def reference(request: Request, tenant: str) -> str:
    first_user = next((m for m in request.messages if m.role is Role.USER), None)
    user = first_user.text() if first_user is not None else ""
    return (
        "sess_" + hashlib.sha256(f"{tenant}\x00{request.system_text()}\x00{user}".encode()).hexdigest()[:32]
    )


TEXTS = st.sampled_from(["", "You are helpful.", "hi", "é" * 3, "x" * 300, "a\x00b"])
BLOCKS = st.lists(
    st.one_of(st.builds(Text, TEXTS), st.builds(ToolCall, st.just("c1"), st.just("f"), st.just("{}"))),
    max_size=3,
)
MESSAGES = st.lists(st.builds(Message, st.sampled_from(list(Role)), BLOCKS.map(tuple)), max_size=4)
REQUESTS = st.builds(
    Request, st.just("m"), MESSAGES.map(tuple), system=st.lists(st.builds(Text, TEXTS), max_size=2).map(tuple)
)


@settings(max_examples=200, deadline=None)
@given(
    turns=st.lists(
        st.tuples(REQUESTS, st.sampled_from(["", "tenant-a", "tenant-b"])), min_size=1, max_size=8
    ),
    held_chars=st.sampled_from([0, 10, 400, 4 << 20]),
    held_keys=st.sampled_from([1, 2, 4096]),
)
def test_each_key_is_the_digest_of_its_opening(turns, held_chars, held_keys):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session, "_derived", BoundedCache(held_keys, session._chars, held_chars))
        for request, tenant in turns * 2:
            assert derive_session_key(request, tenant) == reference(request, tenant)
        assert len(session._derived) <= held_keys
        assert sum(len(text) for opening in session._derived for text in opening) <= held_chars
