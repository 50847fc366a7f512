"""The ring the captures live in: bounded in bytes, oldest out first, and an entry larger than
the whole ring is not kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from gateway.inspector.capture import Capture, Ring

BLANK = Capture(
    id="",
    time=0.0,
    ingress="openai_chat",
    tenant="",
    session="",
    model="m",
    status=200,
    outcome="ok",
    duration=0.0,
    ttft=None,
    usage=None,
    headers={},
    raw=b"",
    received=None,
    routed=None,
    ignored_tokens=0,
    restored=(),
    repairs=(),
    attempts=(),
    started=0.0,
    provider="",
    upstream_model="",
    affinity_break=None,
    turn=None,
    error="",
    size=0,
)


@given(st.lists(st.integers(1, 500), max_size=60), st.integers(1, 2000))
def test_the_ring_keeps_the_newest_that_fit(sizes, cap):
    ring = Ring(cap)
    for i, size in enumerate(sizes):
        ring.add(replace(BLANK, id=str(i), size=size))
    kept = [c.id for c in reversed(ring.newest(lambda c: True, 1000))]
    assert ring.bytes == sum(sizes[int(i)] for i in kept) <= cap
    # the kept ones are the newest that fit, in order: nothing older than an evicted one survives
    expected, total = [], 0
    for i in reversed(range(len(sizes))):
        if sizes[i] > cap:
            continue
        if total + sizes[i] > cap:
            break
        total += sizes[i]
        expected.append(str(i))
    assert kept == expected[::-1]
    assert ring.evicted == len(sizes) - len(kept)
    assert all(ring.get(i) is not None for i in kept)


def test_an_entry_larger_than_the_ring_is_not_kept():
    ring = Ring(100)
    assert ring.add(replace(BLANK, id="a", size=60))
    assert not ring.add(replace(BLANK, id="b", size=101))
    assert ring.get("b") is None and ring.get("a") is not None


_NAMES = st.sampled_from(["content-type", "user-agent", "x-session-id", "authorization", "accept", "x-other"])


@given(
    st.lists(st.dictionaries(_NAMES, st.sampled_from(["a", "b", "application/json"]), max_size=6), max_size=8)
)
def test_the_headers_a_capture_shows_are_the_listed_ones_shared_per_set(requests):
    """What `_shown` keeps equals what each request's own dict of the listed headers was (same
    keys in `CLIENT_HEADERS` order, same values, never a credential), and one set of headers seen
    again is the same read-only object."""
    from multidict import CIMultiDict, CIMultiDictProxy

    from gateway.inspector import capture

    capture._HEADER_SETS.clear()
    for sent in requests:
        headers = CIMultiDictProxy(CIMultiDict({name.title(): value for name, value in sent.items()}))
        before = {name: headers[name] for name in capture.CLIENT_HEADERS if name in headers}
        shown = capture._shown(headers)
        assert list(shown.items()) == list(before.items()) and "authorization" not in shown
        assert capture._shown(headers) is shown
        assert len(capture._HEADER_SETS) <= capture._HEADER_SETS.most
