"""A body read in parts is depth-checked field by field, a long field's nesting remembered by its
text (gateway/ingress/field_depth.py): the verdict is the walk's (`check_depth`), whatever was
remembered before and whatever the limit."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress import field_depth
from gateway.ingress.errors import ClientError, check_depth
from gateway.ingress.field_depth import check_fields_depth, nesting

_json = st.recursive(
    st.none() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12,
)


def _verdict(check) -> str | None:
    try:
        check()
    except ClientError as exc:
        return str(exc)
    return None


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["model", "tools", "a", "b"]), _json, max_size=4),
    st.lists(_json, max_size=3),
    st.integers(0, 7),
    st.integers(0, 40),
)
def test_a_body_checked_field_by_field_gets_the_walks_verdict(fields, items, limit, remembered):
    body = {**fields, "messages": items}
    texts = {name: orjson.dumps(value) for name, value in fields.items()}
    want = _verdict(lambda: check_depth(body, limit, "messages"))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(field_depth, "REMEMBERED_BYTES", remembered)
        for _ in range(2):  # the second time from what the first remembered
            assert _verdict(lambda: check_fields_depth(dict(body), texts, limit, "messages")) == want


@given(_json)
def test_nesting_is_how_deep_containers_nest(value):
    def deep(v) -> int:
        if isinstance(v, dict):
            return 1 + max(map(deep, v.values()), default=0)
        if isinstance(v, list):
            return 1 + max(map(deep, v), default=0)
        return 0

    assert nesting(value) == deep(value)
