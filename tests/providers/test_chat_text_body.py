"""A whole Chat Completions answer of the common shape has its events made at once
(gateway/providers/openai_compat/text_body.py): exactly the events, or the error, of the general
path (the body decoded as one big delta), for any body: generated bodies of every shape the
decoder reads, and JSON texts the two parsers might read differently."""

from __future__ import annotations

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providers.openai_compat import text_body
from gateway.transcript.events import BlockDelta
from tests.providers.test_chat_text_chunk import ANY, NOTES, TEXT, _maybe
from tests.providers.test_openai_compat import ADAPTERS, target


class _Refuses:
    """A decoder that takes no body: every body takes the general path."""

    def decode(self, data: bytes) -> object:
        raise msgspec.DecodeError("the general path only")


def _decode(kind: str, body: bytes, fast: bool) -> list:
    with pytest.MonkeyPatch.context() as patch:
        if not fast:
            patch.setattr(text_body, "DECODER", _Refuses())
        return ADAPTERS[kind].decode_response(body, target(kind))


def _same(kind: str, body: bytes) -> list:
    fast = _decode(kind, body, True)
    assert fast == _decode(kind, body, False)
    return fast


# the stream chunk's strategies (values of every JSON type and truthiness, objects holding any
# subset of their fields), with usages of every kind the dialects send
USAGE = st.one_of(
    ANY,
    st.just({"prompt_tokens": 3, "completion_tokens": 2}),
    st.just({"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}}),
    st.just({"completion_tokens_details": {"reasoning_tokens": 1}}),
)
CALLS = st.one_of(
    ANY, st.just([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
)


MESSAGE = st.one_of(
    ANY,
    _maybe(
        role=st.just("assistant"),
        content=st.one_of(TEXT, st.just([{"type": "text", "text": "t"}])),
        reasoning_content=TEXT,
        refusal=TEXT,
        tool_calls=CALLS,
        annotations=NOTES,
    ),
)
CHOICE = st.one_of(
    ANY,
    _maybe(
        index=st.sampled_from([0, 1, 0.0, True, None, "0"]),
        message=MESSAGE,
        finish_reason=st.sampled_from([None, "", "stop", "length", "tool_calls", "content_filter", "odd", 0]),
        usage=USAGE,
        logprobs=ANY,
    ),
)
BODY = _maybe(
    id=TEXT,
    object=st.just("chat.completion"),
    model=TEXT,
    choices=st.one_of(ANY, st.lists(CHOICE, max_size=2)),
    usage=USAGE,
    error=st.one_of(ANY, st.just({"message": "boom", "type": "server_error"})),
)

# bodies near the shape (most of them of it): one choice, text, a finish, usages of every kind,
# the fields that send a body to the general path empty, null or set
_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
_NOTE = {
    "type": "url_citation",
    "url_citation": {"url": "https://a.example", "start_index": 0, "end_index": 1},
}
NEAR_MESSAGE = st.fixed_dictionaries(
    {"content": st.one_of(st.none(), st.text(max_size=6))},
    optional={
        "role": st.just("assistant"),
        "reasoning_content": st.sampled_from([None, "", "r"]),
        "refusal": st.sampled_from([None, "", "no"]),
        "tool_calls": st.sampled_from([None, [], [_CALL]]),
        "annotations": st.sampled_from([None, [], [_NOTE]]),
    },
)
NEAR_CHOICE = st.fixed_dictionaries(
    {
        "message": st.one_of(st.none(), NEAR_MESSAGE),
        "finish_reason": st.sampled_from(["stop", "length", "odd", ""]),
    },
    optional={"index": st.sampled_from([0, 1]), "usage": USAGE, "logprobs": st.none()},
)
NEAR = st.fixed_dictionaries(
    {"choices": st.lists(NEAR_CHOICE, min_size=1, max_size=2)},
    optional={
        "id": TEXT,
        "model": TEXT,
        "usage": USAGE,
        "error": st.sampled_from([None, False, {"message": "x"}]),
    },
)


@settings(max_examples=400)
@given(st.one_of(BODY, NEAR, NEAR), st.sampled_from(sorted(ADAPTERS)))
def test_any_body_decodes_alike(body, kind):
    _same(kind, orjson.dumps(body))


def test_the_generated_bodies_reach_the_fast_path():
    """So that the comparison above is not of the general path with itself."""
    dialect = ADAPTERS["openai_chat"].dialect
    found = []

    @settings(max_examples=200, database=None)
    @given(NEAR)
    def sample(body):
        try:
            found.append(text_body.text_events(orjson.dumps(body), dialect) is not None)
        except (AttributeError, TypeError):  # a usage that is no object: the error path
            found.append(False)

    sample()
    assert sum(found) >= len(found) // 10


def test_the_usual_answer_takes_the_fast_path():
    body = orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Hi.", "refusal": None, "annotations": []},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    )
    assert text_body.text_events(body, ADAPTERS["openai_chat"].dialect) is not None
    events = _same("openai_chat", body)
    assert [e.text for e in events if type(e) is BlockDelta] == ["Hi."]


@pytest.mark.parametrize(
    "text",
    [
        '{"choices":[{"message":{"content":"a","content":"b"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"content":5,"content":"b"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"refusal":"no","refusal":null,"content":"c"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"content":"\\u00e9\\ud83d\\ude00"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"content":"\\ud800"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"pad":'
        + "[" * 1500
        + "]" * 1500
        + "}",
        '{"choices":[{"index":0.0,"message":{"content":"x"},"finish_reason":"stop"}]}',
        '{"choices":[{"index":1000000000000000000000000000000,"message":{"content":"x"},"finish_reason":"stop"}]}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1e30}}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3},"usage":null}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":null,"usage":{"completion_tokens":4}}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100000000000000000000000}}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1e400}}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"note":"\\ud800"}}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":[1]}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":"x"}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop","usage":{"prompt_tokens":2}}]}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"},{"index":1,"message":{}}]}',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]} trailing',
        '{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]',
        b'{"choices":[{"message":{"content":"\xff"},"finish_reason":"stop"}]}'.decode("latin-1"),
        "[]",
        "",
    ],
)
def test_json_texts_the_parsers_could_read_differently(text):
    _same("openai_chat", text.encode("latin-1") if "\xff" in text else text.encode())


def test_a_number_beyond_a_double_in_an_unread_field_is_the_one_difference():
    """Documented: orjson refuses the whole body for it, msgspec skips the field."""
    body = b'{"pad":1e400,"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}'
    fast, general = _decode("openai_chat", body, True), _decode("openai_chat", body, False)
    assert any(getattr(e, "text", None) == "x" for e in fast)
    assert fast != general and "not a JSON object" in general[0].error.message
