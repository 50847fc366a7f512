"""A short body parsed in one call (gateway/ingress/admission.py `parse_short`) is what the exchange's
steps make of it (gateway/exchange.py `_run`: the memo's held bound, `values_within_budget`,
`offloads`, `_parse`): the same body, or the same error; and it leaves to those steps every body
they would count exactly or offload."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import ServerConfig
from gateway.ingress.admission import parse_counted, parse_short, values_within_budget
from gateway.ingress.budget import offloads
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import SHORT_BODY, DecodeMemo
from gateway.ingress.split import parse_shared

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=30,
)
_messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.text(max_size=5) | st.lists(_json, max_size=3)}
    ),
    max_size=6,
)
_bodies = st.one_of(
    _json.map(orjson.dumps),
    st.fixed_dictionaries({"model": st.just("m"), "messages": _messages}).map(orjson.dumps),
    st.integers(1, 80).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b"", b"{", b'{"model": "m",}', b"\xff", b'{"a": 1} x', b"  {}  ", b'"\\ud800"']),
    st.binary(max_size=40),
)
_limits = st.sampled_from(
    [
        ServerConfig(),
        ServerConfig(max_json_values=3),
        ServerConfig(max_json_depth=3),
        ServerConfig(max_messages=2, max_blocks=2, max_tools=1),
        ServerConfig(max_json_values=12, max_json_depth=5, max_blocks=1),
    ]
)


def _steps(raw: bytes, limits: ServerConfig, memo: DecodeMemo, field: str | None) -> Any:
    """The exchange's steps for a body (`_run` and `_parse`, no worker thread: an offloaded body
    is reported as such)."""

    async def run() -> Any:
        held = None if field is None else memo.held_bound("scope", raw, field)
        values = await values_within_budget(raw, limits, held)
        if offloads(values, len(raw)):
            return "offloaded"
        if field is None:
            return await parse_counted(raw, limits, values), None
        parsed = parse_shared(raw, field, memo, "scope", limits, values, False, None, held)
        assert parsed is not None  # no other thread holds the memo
        return parsed

    return _outcome(lambda: asyncio.run(run()))


def _outcome(call: Any) -> Any:
    try:
        return call()
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param, exc.code)


@settings(max_examples=400, deadline=None)
@given(_bodies, _limits, st.sampled_from(["messages", None]))
def test_a_short_body_is_parsed_as_the_exchanges_steps_parse_it(
    raw: bytes, limits: ServerConfig, field: str | None
) -> None:
    memo = DecodeMemo(1 << 20, min_bytes=SHORT_BODY)
    short = _outcome(lambda: parse_short(raw, limits, memo.min_bytes))
    steps = _steps(raw, limits, memo, field)
    if short is None:  # left to the steps: a long body, one counted exactly, or offloaded
        assert len(raw) >= SHORT_BODY or steps == "offloaded" or type(steps) is tuple and steps[0] == "error"
    elif type(short) is tuple and short[0] == "error":
        assert steps == short
    else:
        assert steps == (short[0], None)


def test_a_body_past_the_value_cap_or_long_is_left_to_the_steps() -> None:
    assert parse_short(b"[1,2,3,4]", ServerConfig(max_json_values=2), SHORT_BODY) is None
    long = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * SHORT_BODY}]})
    assert parse_short(long, ServerConfig(), SHORT_BODY) is None
    assert parse_short(b'{"model": "m"}', ServerConfig(), SHORT_BODY) == ({"model": "m"},)
    assert parse_short(b"null", ServerConfig(), SHORT_BODY) == (None,)
