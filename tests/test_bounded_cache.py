"""The module caches of the request path (gateway/bounded_cache.py): looked up as a dict, never
more than their bound, every entry forgotten at once when full."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway import access_log
from gateway.bounded_cache import BoundedCache
from gateway.ingress import field_depth
from gateway.inspector import capture
from gateway.providers import base
from gateway.transcript import resume


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
