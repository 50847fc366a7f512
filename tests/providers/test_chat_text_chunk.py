"""The typed decode of a Chat Completions text chunk (gateway/providers/openai_compat/text_chunk.py)
gives exactly the events of the dict path, for any chunk: recorded streams, generated chunks of
every shape the decoder reads, and JSON texts the two parsers might read differently."""

from __future__ import annotations

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providers.openai_compat import text_chunk
from tests.conftest import fixture_path
from tests.providers.test_openai_compat import ADAPTERS, chunk_lines, sse, target


class _Refuses:
    """A decoder that takes no chunk: every chunk takes the dict path."""

    def decode(self, data: str) -> object:
        raise msgspec.DecodeError("the dict path only")


def _decode(kind: str, body: bytes, typed: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list, bool]:
    with monkeypatch.context() as patch:
        if not typed:
            patch.setattr(text_chunk, "DECODER", _Refuses())
            patch.setattr(text_chunk, "OPENING", _Refuses())
        decoder = ADAPTERS[kind].stream_decoder(target(kind))
        events = decoder.feed(body) + decoder.finish()
    return events, decoder.failed


def _same(kind: str, body: bytes, monkeypatch: pytest.MonkeyPatch) -> list:
    typed = _decode(kind, body, True, monkeypatch)
    assert typed == _decode(kind, body, False, monkeypatch)
    return typed[0]


@pytest.mark.parametrize(
    ("kind", "folder", "name"),
    [
        ("openai_chat", "openai-chat", "openai-text.chunks.txt"),
        ("openai_chat", "openai-chat", "azure-model-router.1.chunks.txt"),
        ("deepseek", "deepseek", "deepseek-reasoning.chunks.txt"),
        ("deepseek", "deepseek", "deepseek-tool-call.chunks.txt"),
        ("mistral", "mistral", "mistral-tool-call.chunks.txt"),
        ("kimi", "moonshotai", "moonshotai-usage-live.chunks.txt"),
    ],
)
def test_recorded_streams_decode_alike(kind, folder, name, monkeypatch):
    events = _same(kind, sse(chunk_lines(fixture_path(folder, name))), monkeypatch)
    assert len(events) > 3


# values the decoder reads, of every JSON type and truthiness
ANY = st.sampled_from([None, True, False, 0, 1, 0.0, "", "x", [], ["x"], {}, {"type": "text"}])
TEXT = st.one_of(st.none(), st.text(max_size=6), ANY)
USAGE = st.one_of(ANY, st.just({"prompt_tokens": 3, "completion_tokens": 2}))
CALLS = st.one_of(ANY, st.just([{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}]))
NOTES = st.one_of(ANY, st.just([{"type": "url_citation", "url_citation": {"url": "https://a.example"}}]))


def _maybe(**fields: st.SearchStrategy) -> st.SearchStrategy[dict]:
    """Objects holding any subset of `fields` (a key absent and a key null are not alike)."""
    return st.fixed_dictionaries({}, optional=fields)


DELTA = st.one_of(
    ANY,
    _maybe(
        content=st.one_of(TEXT, st.just([{"type": "text", "text": "t"}])),
        reasoning_content=TEXT,
        refusal=TEXT,
        tool_calls=CALLS,
        annotations=NOTES,
        role=TEXT,
    ),
)
CHOICE = st.one_of(
    ANY,
    _maybe(
        index=st.sampled_from([0, 1, 0.0, True, False, None, "0", -1]),
        delta=DELTA,
        finish_reason=st.sampled_from([None, "", "stop", "length", "tool_calls", 0]),
        usage=USAGE,
        logprobs=ANY,
    ),
)
CHUNK = _maybe(
    id=TEXT,
    model=TEXT,
    choices=st.one_of(ANY, st.lists(CHOICE, max_size=3)),
    usage=USAGE,
    error=st.one_of(ANY, st.just({"message": "boom", "type": "server_error"})),
    obfuscation=TEXT,
)
OPENING = {"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}


@settings(max_examples=300)
@given(st.lists(CHUNK, max_size=6), st.booleans())
def test_any_chunk_decodes_alike(chunks, done):
    with pytest.MonkeyPatch.context() as monkeypatch:
        lines = [orjson.dumps(c).decode() for c in (OPENING, *chunks)]
        _same("openai_chat", sse(lines, done), monkeypatch)


@settings(max_examples=300)
@given(st.lists(CHUNK, min_size=1, max_size=4), st.booleans())
def test_any_opening_chunk_decodes_alike(chunks, done):
    """The chunks before the answer started (the typed opening: its MessageStart, then what
    `_typed_chunk` reads), none of them the usual opening."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _same("openai_chat", sse([orjson.dumps(c).decode() for c in chunks], done), monkeypatch)


@pytest.mark.parametrize(
    "opening",
    [
        '{"id":"a","id":"b","model":"m","choices":[]}',  # the last of a repeated key
        '{"id":null,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}',
        '{"id":"","model":null,"choices":[]}',  # no MessageStart: the next chunk opens
        '{"id":5,"model":"m","choices":[]}',
        '{"id":"a","model":["m"],"choices":[]}',
        '{"id":"a","choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1e400}}',
        '{"id":"a","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":[2]}',
        '{"id":"a","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}',
        '{"id":"a","error":{"message":"boom"}}',
    ],
)
def test_opening_texts_the_parsers_could_read_differently(opening, monkeypatch):
    events = _same("openai_chat", sse([opening, '{"choices":[{"delta":{"content":"y"}}]}']), monkeypatch)
    assert events


@pytest.mark.parametrize(
    "line",
    [
        '{"choices":[{"delta":{"content":"a","content":"b"}}]}',  # the last of a repeated key
        '{"choices":[{"delta":{"content":5,"content":"b"}}]}',
        '{"choices":[{"delta":{"refusal":"no","refusal":null,"content":"c"}}]}',
        '{"choices":[{"delta":{"content":"\\u00e9\\ud83d\\ude00"}}]}',
        '{"choices":[{"delta":{"content":"\\ud800"}}]}',  # a lone surrogate: not JSON for either
        '{"choices":[{"delta":{"content":"x"}}],"pad":' + "[" * 1500 + "]" * 1500 + "}",
        '{"choices":[{"index":0.0,"delta":{"content":"x"}}]}',
        '{"choices":[{"index":1000000000000000000000000000000,"delta":{"content":"x"}}]}',
        '{"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1e30}}',
        # a usage (kept raw by the typed decode, read by orjson): values, repeats, what orjson refuses
        '{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}',
        '{"choices":[],"usage":{"prompt_tokens":3},"usage":null}',
        '{"choices":[],"usage":null,"usage":{"completion_tokens":4}}',
        '{"choices":[],"usage":{"prompt_tokens":100000000000000000000000}}',
        '{"choices":[],"usage":{"prompt_tokens":1e400}}',
        '{"choices":[],"usage":{"note":"\\ud800"}}',
        '{"choices":[],"usage":[1]}',
        '{"choices":[],"usage":"x"}',
        '{"choices":[{"index":1,"delta":{},"usage":{"a":1e400}}],"usage":{"prompt_tokens":1}}',
        '{"choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":2}}],'
        '"usage":{"prompt_tokens":1}}',
        '{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"},'
        '{"index":0,"delta":{"content":"y"},"usage":[]}]}',
        '{"choices":[{"delta":{"content":"x"}}]} trailing',
        '{"choices":[{"delta":{"content":"x"}}]',
        "[]",
    ],
)
def test_json_texts_the_parsers_could_read_differently(line, monkeypatch):
    opening = orjson.dumps(OPENING).decode()
    _same("openai_chat", sse([opening, line]), monkeypatch)


def test_a_number_beyond_a_double_in_an_unread_field_is_the_one_difference(monkeypatch):
    """Documented: orjson refuses the whole chunk for it, msgspec skips the field."""
    finish = '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    body = sse(
        [orjson.dumps(OPENING).decode(), '{"pad":1e400,"choices":[{"delta":{"content":"x"}}]}', finish]
    )
    typed, typed_failed = _decode("openai_chat", body, True, monkeypatch)
    _, dict_failed = _decode("openai_chat", body, False, monkeypatch)
    assert not typed_failed and dict_failed
    assert any(getattr(e, "text", None) == "x" for e in typed)
