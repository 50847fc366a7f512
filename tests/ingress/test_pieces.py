"""A large body parsed in pieces (gateway/ingress/pieces.py) is what the whole parse gives, value
or error, and no one parse call reads much more than a piece of it."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import ServerConfig
from gateway.ingress import admission, pieces
from gateway.ingress.budget import parsed_in_pieces
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.pieces import parse_json_pieces
from gateway.ingress.split import parse_shared
from gateway.offload import OFFLOAD_BYTES, PIECES_VALUES

SPACE = st.sampled_from([b"", b" ", b"\n", b"\t ", b"\r\n  "])
ODD_NUMBERS = [
    b"-0", b"0.0", b"-0.0", b"1e400", b"1E+400", b"1e-400", b"2e308", b"1.7976931348623157e308",
    b"123456789012345678901234567890", b"18446744073709551615", b"18446744073709551616",
    b"-9223372036854775809", b"1" * 120, b"01", b"1.", b"-", b".5", b"1e", b"1e5", b"0.1E-2",
]  # fmt: skip
ODD_STRINGS = [
    b'"\\u00e9"', b'"\\ud83d\\ude00"', b'"\\ud800"', b'"\\udc00"', b'"\\/"', b'"\xff"', b'"\x01"',
    '"é"'.encode(), b'"\\x"', b'"\xed\xa0\x80"', b'"a\\"b"', b'"\\u0000"', b'"\x7f"',
]  # fmt: skip
# few keys, one of them written two ways: duplicate keys come often
KEYS = st.sampled_from([b'"a"', b'"b"', b'"\\u0061"', '"é"'.encode(), b'"\\ud800"', b'"\xff"'])

scalars = st.one_of(
    st.integers(-(10**30), 10**30).map(lambda n: str(n).encode()),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: repr(f).encode()),
    st.sampled_from(ODD_NUMBERS),
    st.text(max_size=12).map(orjson.dumps),
    st.sampled_from(ODD_STRINGS),
    st.sampled_from([b"true", b"false", b"null", b"tru", b"NaN"]),
)


def _array(items: list[bytes], space: bytes) -> bytes:
    return b"[" + space + (space + b"," + space).join(items) + space + b"]"


def _object(members: list[tuple[bytes, bytes]], space: bytes) -> bytes:
    return (
        b"{" + space + b",".join(key + space + b":" + space + value for key, value in members) + space + b"}"
    )


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.builds(_array, st.lists(inner, max_size=6), SPACE),
        st.builds(_object, st.lists(st.tuples(KEYS, inner), max_size=6), SPACE),
    ),
    max_leaves=40,
)

# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_FIRSTS = st.one_of(st.sampled_from(ODD_NUMBERS + ODD_STRINGS), values)
_BETWEEN = st.lists(st.tuples(KEYS, values), max_size=3)


@st.composite
def shadowed(draw: st.DrawFn) -> bytes:
    """An object whose key comes twice, the value it keeps last: what the first value holds is
    read by the whole parse only (here an odd one, that orjson may refuse)."""
    key, space = draw(KEYS), draw(SPACE)
    first = draw(_FIRSTS)
    first = draw(st.sampled_from([first, b"[" + first + b"]", b'{"k":' + first + b"}"]))
    between = draw(_BETWEEN)
    return _object([(key, first), *between, (key, draw(values))], space)


_SHADOWED = shadowed()
_BODIES = st.one_of(
    st.builds(_object, st.lists(st.tuples(KEYS, st.one_of(values, _SHADOWED)), max_size=6), SPACE),
    _SHADOWED,
    st.builds(_array, st.lists(values, max_size=6), SPACE),
    values,
)
_NEAR_VALID = st.integers(0, 3)
_EDIT_BYTES = st.sampled_from([b"", b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\xff", b"0", b"e"])
_DROPPED = st.integers(0, 1)


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    body = draw(_BODIES)
    body = draw(SPACE) + body + draw(SPACE)
    if draw(_NEAR_VALID) == 0:  # near-valid: one byte dropped, changed or added
        at = draw(st.integers(0, len(body)))
        byte = draw(_EDIT_BYTES)
        body = body[:at] + byte + body[at + draw(_DROPPED) :]
    return body


def outcome(parse: Any, raw: bytes, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    try:
        value = parse(raw, *args, **kwargs)
    except ClientError as exc:
        return ("error", exc.status, exc.message, exc.code, exc.param)
    return ("value", tokens(value))


def tokens(value: Any) -> list[str]:
    """`value` written out, walked without recursion (a body may nest 1,000 deep): types, key
    order and -0.0 against 0.0 tell."""
    out: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            out.append(f"{{{len(node)}")
            for key, child in reversed(node.items()):
                stack.append(child)
                stack.append(("key", key))
        elif type(node) is list:
            out.append(f"[{len(node)}")
            stack.extend(reversed(node))
        else:
            out.append(repr(node))
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.integers(1, 64), st.integers(1, 6), st.sampled_from([None, "a", "b"]))
def test_pieces_parse_as_the_whole_body(raw: bytes, piece: int, max_depth: int, skip: str | None) -> None:
    assert outcome(parse_json_pieces, raw, max_depth, skip, piece=piece) == outcome(
        parse_json_body, raw, max_depth, skip
    )


def test_nested_past_orjson_in_a_skipped_field_is_the_whole_parse_error() -> None:
    # the depth check skips the transcript field: orjson's own limit (1024 levels) is what refuses
    # it, wherever the deep value is read (a group of the body's fields, of a large list's items)
    filler = b'"' + b"x" * 5000 + b'"'
    for levels, ok in ((1022, True), (1023, False), (1030, False)):
        deep = b"[" * levels + b"]" * levels
        for raw in (b'{"a":[' + deep + b'],"b":[1,2,3]}', b'{"a":[' + filler + b"," + deep + b'],"b":[1]}'):
            for piece in (1, 8, 4096):
                got = outcome(parse_json_pieces, raw, 64, "a", piece=piece)
                assert got == outcome(parse_json_body, raw, 64, "a")
                assert (got[0] == "value") is ok


def _large_body() -> bytes:
    blocks = [{"type": "text", "text": "x" * (i % 7)} for i in range(20_000)]
    messages = [{"role": "user", "content": blocks[i : i + 2_000]} for i in range(0, 20_000, 2_000)]
    return orjson.dumps(
        {"model": "m", "messages": messages, "max_tokens": 5, "meta": {"k": [1.5, -0, 2**63]}}
    )


class Recorded:
    """A parse call recorded by the length of what it read."""

    def __init__(self, call: Any, lengths: list[int]) -> None:
        self.call, self.lengths = call, lengths

    def __call__(self, data: Any) -> Any:
        self.lengths.append(len(data))
        return self.call(data)


def test_no_orjson_call_reads_more_than_a_piece_of_a_large_body(monkeypatch: Any) -> None:
    raw = _large_body()
    piece = 16 << 10
    assert len(raw) > 30 * piece
    lengths: list[int] = []
    monkeypatch.setattr(pieces.orjson, "loads", Recorded(orjson.loads, lengths))
    expected = orjson.loads(raw)
    lengths.clear()
    assert tokens(parse_json_pieces(raw, 64, "messages", piece=piece)) == tokens(expected)
    assert len(lengths) > 10
    # a group closes past `piece`, by at most its last value (a block, ~40 bytes) and brackets
    assert max(lengths) < piece + 100


def test_the_offloaded_parse_reads_in_pieces_when_told(monkeypatch: Any) -> None:
    raw = _large_body()
    expected = tokens(orjson.loads(raw))
    monkeypatch.setattr(pieces.parse_json_pieces, "__defaults__", (None, 16 << 10))
    for pieced in (True, False):
        lengths: list[int] = []
        monkeypatch.setattr(pieces.orjson, "loads", Recorded(orjson.loads, lengths))
        body, parts = admission._parse_and_count(raw, 64, "messages", pieced)
        assert tokens(body) == expected and parts >= 20_000
        assert (max(lengths) < (16 << 10) + 100) is pieced
        assert (len(raw) in lengths) is not pieced


def test_only_a_body_whose_whole_parse_holds_the_loop_long_is_parsed_in_pieces() -> None:
    """Decided from the count that offloads it (gateway/offload.py): an agent's 5,000-message
    turn (~72,000 values, 5.6 MB) is parsed by one orjson call, at half the pieces' cost."""
    assert not parsed_in_pieces(PIECES_VALUES - 1, OFFLOAD_BYTES - 1)
    assert parsed_in_pieces(PIECES_VALUES, 1)
    assert parsed_in_pieces(1, OFFLOAD_BYTES)
    assert parsed_in_pieces(None, 1)  # past the C-speed bound: counted exactly, ever so many


def test_a_large_body_parsed_whole_by_the_worker_thread_reads_in_pieces(monkeypatch: Any) -> None:
    # the memo-aware parse (gateway/ingress/split.py): a body the memo has not seen is parsed
    # whole, in pieces in the worker thread (`wait`), at once on the event loop's
    raw = _large_body()
    expected = tokens(orjson.loads(raw))
    monkeypatch.setattr(pieces.parse_json_pieces, "__defaults__", (None, 16 << 10))
    few = PIECES_VALUES - 1  # a bound of the values under the pieces' threshold: parsed whole
    for wait, values, pieced in ((True, None, True), (True, few, False), (False, None, False)):
        lengths: list[int] = []
        monkeypatch.setattr(pieces.orjson, "loads", Recorded(orjson.loads, lengths))
        parsed = parse_shared(raw, "messages", DecodeMemo(1 << 20), "scope", ServerConfig(), values, wait)
        assert parsed is not None
        assert tokens(parsed[0]) == expected
        assert (max(lengths) < (16 << 10) + 100) is pieced
        assert (len(raw) in lengths) is not pieced
