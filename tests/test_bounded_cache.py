"""The module caches of the request path (gateway/bounded_cache.py): looked up as a dict, never
more than their bound, every entry forgotten at once when full."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway import access_log, session
from gateway.bounded_cache import BoundedCache
from gateway.ingress import field_depth
from gateway.inspector import capture
from gateway.providers import base
from gateway.transcript import resume
from gateway.upstream_http import HttpClient


@given(st.integers(1, 5), st.lists(st.integers(0, 9), max_size=40))
def test_a_bounded_cache_keeps_what_it_is_given_within_its_bound(most, keys):
    cache: BoundedCache[int, str] = BoundedCache(most)
    model: dict[int, str] = {}
    for key in keys:
        found = cache.get(key)
        assert found == model.get(key)
        if found is None:
            value = f"v{key}"
            assert cache.keep(key, value) is value
            if len(model) >= most:  # full: forgotten at once, then this one kept
                model.clear()
            model[key] = value
        assert cache == model and len(cache) <= most


def test_the_request_paths_module_caches_are_bounded():
    caches = (
        resume._SHARED,
        field_depth._NESTING,
        base._URLS,
        capture._HEADER_SETS,
        access_log._session_hashes,
        access_log._shapes,
    )
    assert all(type(cache) is BoundedCache and 0 < cache.most <= 4096 for cache in caches)


@given(
    st.integers(1, 5),
    st.integers(0, 12),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 8)), max_size=40),
)
def test_a_weighed_cache_keeps_within_its_count_and_its_weight(most, heaviest, entries):
    cache: BoundedCache[int, int] = BoundedCache(most, lambda key, value: value, heaviest)
    model: dict[int, int] = {}
    for key, weight in entries:
        found = cache.get(key)
        assert found == model.get(key)
        if found is None:
            assert cache.keep(key, weight) == weight
            if weight <= heaviest:  # heavier alone: not kept
                if len(model) >= most or sum(model.values()) + weight > heaviest:
                    model.clear()
                model[key] = weight
        assert cache == model and cache.weight == sum(model.values()) <= heaviest and len(cache) <= most
    cache.clear()
    assert cache.weight == 0


def test_session_keys_are_bounded_by_the_text_they_keep():
    derived = session._derived
    assert type(derived) is BoundedCache and derived.most <= 4096 and derived.heaviest == session._HELD_CHARS
    derived.clear()
    opening = ("", "s" * (session._HELD_CHARS + 1), "hi")
    key = session._derive(*opening)
    assert derived.keep(opening, key) == key and opening not in derived  # too large to keep alone
    small = ("t", "system", "hi")
    derived.keep(small, session._derive(*small))
    assert derived.weight == len("t") + len("system") + len("hi")


def test_an_upstream_clients_caches_are_bounded():
    client = HttpClient(user_agent="test", read_buffer=1 << 16)
    caches = (client._heads, client._dns)
    assert all(type(cache) is BoundedCache and 0 < cache.most <= 4096 for cache in caches)
