"""`fix_role_order` skips its loop over runs when the neighbouring roles show that nothing can
join or be inserted (`_may_join`): the result and report are those of the loop, for any
transcript and every family's capabilities."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import KINDS, get_adapter
from gateway.repair import role_order
from gateway.repair.role_order import fix_role_order
from gateway.transcript.model import Message, Role, Text
from tests.property.test_rich_content import rich_requests
from tests.property.transcripts import requests, target_for
from tests.repair.helpers import assistant, call, result, tool, user
from tests.repair.test_holds import sparse_requests


def _same(messages, kind: str) -> None:
    caps = get_adapter(kind).capabilities
    got = fix_role_order(messages, caps)
    real = role_order._may_join
    role_order._may_join = lambda m, c: True
    try:
        want = fix_role_order(messages, caps)
    finally:
        role_order._may_join = real
    assert got == want
    assert (got[0] is messages) == (want[0] is messages)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS))
def test_the_scan_agrees_with_the_loop(data, kind):
    target = target_for(kind)
    _same(data.draw(requests(target, False)).messages, kind)
    _same(data.draw(sparse_requests(target)).messages, kind)
    _same(data.draw(rich_requests(target)).messages, kind)


def test_what_the_scan_must_not_miss():
    """Each neighbourhood the loop acts on, for some family."""
    cases = [
        (user("q"), assistant("a"), assistant(call("c"))),
        (user("q"), user("more")),
        (user("q"), assistant(call("c")), tool(result("c")), tool(result("c"))),
        (user("q"), assistant(call("c")), tool(result("c")), user("next")),
    ]
    for messages in cases:
        for kind in KINDS:
            _same(messages, kind)
    changed = [
        kind for kind in KINDS for m in cases if fix_role_order(m, get_adapter(kind).capabilities)[0] is not m
    ]
    assert changed  # the comparison above compared some changes, not only unchanged transcripts


def test_the_roles_resumed_on_a_longer_turn_are_the_whole_scans():
    """The next turn's roles: those held, then the new ones (a system message and two assistant
    messages in a row, across the boundary, only there)."""
    opening = tuple(user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(20))
    turns = [
        opening,
        (*opening, assistant("again")),  # the boundary pair: assistant, assistant
        (*opening, assistant("again"), Message(Role.SYSTEM, (Text("rules"),)), user("go")),
    ]
    for messages in turns:
        role_order._CODES_SO_FAR.clear()
        want = role_order._role_codes(messages)
        role_order._CODES_SO_FAR.clear()
        role_order._role_codes(opening)
        assert role_order._CODES_SO_FAR.find(messages, None)[0] == len(opening)  # resumed
        assert role_order._role_codes(messages) == want
        for kind in KINDS:
            _same(messages, kind)
