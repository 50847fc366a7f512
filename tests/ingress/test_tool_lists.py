"""Tool lists decoded before are found again by their text (gateway/ingress/tool_lists.py): a
request decodes to the same Request, or is refused with the same error, whether its tools were
seen before or not, and as the whole request's validation reads them."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.ingress.chat import decode as chat_decode
from gateway.ingress.chat import wire as w
from gateway.ingress.errors import ClientError
from gateway.ingress.gemini import decode as gemini_decode
from gateway.ingress.gemini import tools as gemini_tool_decode
from gateway.ingress.messages import decode as messages_decode
from gateway.ingress.messages import wire as mw
from gateway.ingress.responses import decode as responses_decode
from gateway.ingress.tool_lists import CHARGE, MAX_TEXT, ToolLists
from gateway.transcript.model import CacheControl, ToolSpec
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"t" * 32)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.sampled_from(["get_weather", "search", "a-b_c", "", "bad name", "x" * 65, 7])
schemas = st.sampled_from(
    [
        None,
        {},
        {"type": "object", "properties": {"q": {"type": "string"}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1.5}}},
        "not an object",
    ]
)
functions = st.fixed_dictionaries(
    {"name": names},
    optional={
        "description": st.sampled_from(["Weather", "", None, 3]),
        "parameters": schemas,
        "strict": st.booleans(),
    },
)
tools = st.fixed_dictionaries(
    {"type": st.sampled_from(["function", "function", "web_search"]), "function": functions},
    optional={
        "cache_control": st.sampled_from(
            [{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}, {"type": "x"}]
        )
    },
)
tool_lists = st.lists(tools, max_size=4) | st.sampled_from([None, "tools", {"type": "function"}, [1], [[]]])
choices = st.sampled_from([None, "auto", "required", {"type": "function", "function": {"name": "search"}}])


def outcome(body: dict[str, Any]) -> Any:
    try:
        return chat_decode.decode_request(body, SEALER)
    except ClientError as error:
        return (error.status, error.message, error.param, error.code)


def whole_tools(body: dict[str, Any]) -> tuple[ToolSpec, ...]:
    """The tools as the whole request's model reads them (what the head validated before)."""
    wire = w.ChatCompletionRequest.model_validate(body)
    return tuple(
        ToolSpec(
            t.function.name,
            t.function.description or "",
            t.function.parameters or {"type": "object", "properties": {}},
            cache=CacheControl(t.cache_control.ttl) if t.cache_control is not None else None,
        )
        for t in wire.tools or ()
    )


class _Never:
    """Decodes every list, keeps none (the decode without the memo)."""

    def __init__(self, decode: Any) -> None:
        self.decoded = decode


def with_tools(body: dict[str, Any], raw_tools: Any, choice: Any) -> dict[str, Any]:
    """`body` with `tools` (left out now and then: missing is not null) and `tool_choice`."""
    if raw_tools is not None or choice is None:
        body["tools"] = raw_tools
    if choice is not None:
        body["tool_choice"] = choice
    return body


def alike(outcome: Any, module: Any, decode: Any, body: dict[str, Any]) -> Any:
    """The outcome of `body` decoded twice (the second finds what the first kept) and without
    the memo: all three the same."""
    first, again = outcome(body), outcome(body)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_TOOL_LISTS", _Never(decode))
        unkept = outcome(body)
    assert first == again == unkept
    return first


@SETTINGS
@given(tool_lists, choices)
def test_seen_or_not_a_request_decodes_or_fails_alike(raw_tools, choice):
    body = with_tools({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, raw_tools, choice)
    first = alike(outcome, chat_decode, chat_decode._tool_specs, body)
    if not isinstance(first, tuple):
        assert first.tools == whole_tools(body)
    else:
        try:
            w.ChatCompletionRequest.model_validate(body)
        except ValidationError:
            return
        # the whole request passes validation: the refusal is the decode's own (names, choice)
        assert first[3] == "invalid_value"


def test_only_lists_that_decode_are_kept():
    calls: list[Any] = []

    def decode(raw: Any) -> int:
        calls.append(raw)
        if raw == ["bad"]:
            raise ValueError("bad")
        return len(raw)

    lists = ToolLists(decode)
    assert lists.decoded(["a", "b"]) == 2
    assert lists.decoded(["a", "b"]) == 2
    assert calls == [["a", "b"]]
    for _ in range(2):
        with pytest.raises(ValueError):
            lists.decoded(["bad"])
    assert calls == [["a", "b"], ["bad"], ["bad"]]
    assert len(lists) == 1


def test_a_list_that_is_not_json_or_too_long_is_decoded_every_time():
    calls: list[Any] = []
    lists = ToolLists(lambda raw: calls.append(raw) or 1)
    odd = [{1, 2}]  # a set: no JSON text to find it by
    long = ["x" * MAX_TEXT]
    for _ in range(2):
        lists.decoded(odd)
        lists.decoded(long)
    assert len(calls) == 4
    assert len(lists) == 0


def test_the_lists_kept_stay_within_the_budget_least_recent_first_out():
    texts = [[f"{n:04d}" + "x" * 990] for n in range(5)]
    charge = CHARGE * len(orjson.dumps(texts[0])) + 256
    lists = ToolLists(len, budget=3 * charge)
    for raw in texts:
        lists.decoded(raw)
    assert len(lists) == 3
    calls: list[Any] = []
    lists._decode = lambda raw: calls.append(raw) or 1  # type: ignore[method-assign]
    lists.decoded(texts[-1])
    assert calls == []
    lists.decoded(texts[0])
    assert calls == [texts[0]]


def test_a_list_is_kept_once_by_each_text_it_comes_in_and_counted_when_read():
    from gateway.ingress.budget import KnownList, item_parts
    from gateway.ingress.errors import nesting

    calls: list[Any] = []
    lists = ToolLists(lambda raw: calls.append(raw) or len(raw))
    listed = [
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
        {"content": [1, 2]},
    ]
    compact, spaced = orjson.dumps(listed), json.dumps(listed).encode()
    assert lists.decoded(listed) == 2 and len(lists) == 1
    # a body read in parts that sends the text orjson writes finds the same entry, now counted
    known = lists.read(compact)
    assert type(known) is KnownList and known.text == compact and known.value == 2
    assert (known.parts, known.nesting) == (sum(map(item_parts, listed)), nesting(listed)) == (3, 4)
    assert lists.read(compact) is known and len(lists) == 1
    # another text of the same values: kept beside it, decoded once in all
    other = lists.read(memoryview(spaced))
    assert type(other) is KnownList and other.text == spaced and other.value == 2
    assert (other.parts, other.nesting) == (3, 4) and len(lists) == 2
    assert lists.decoded(listed) == 2 and calls == [listed]


def test_the_budget_bounds_the_lists_kept_by_either_text():
    texts = [[f"{n:04d}", "x" * 990] for n in range(3)]
    charge = CHARGE * len(orjson.dumps(texts[0])) + 256
    lists = ToolLists(len, budget=3 * charge + 64)
    for raw in texts[:2]:
        lists.decoded(raw)
    spaced = json.dumps(texts[2]).encode()  # another text than orjson's: kept by both
    assert spaced != orjson.dumps(texts[2])
    lists.read(spaced)
    assert sum(CHARGE * len(k) + 256 for k in lists._kept) <= 3 * charge + 64
    assert list(lists._kept) == [orjson.dumps(texts[1]), orjson.dumps(texts[2]), spaced]


# -- the Messages dialect: custom and server tools, whose decode refuses some lists itself -----

messages_tools = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["get_weather", "search", "search", "web_search", "", "bad name"]),
        "input_schema": st.sampled_from([{"type": "object"}, {"properties": {}}, {"type": "string"}, None]),
    },
    optional={
        "type": st.sampled_from(["custom", "web_search_20250305", None]),
        "description": st.sampled_from(["Weather", None, 3]),
        "strict": st.booleans(),
        "cache_control": st.sampled_from([{"type": "ephemeral"}, {"type": "x"}]),
    },
)
messages_lists = st.lists(messages_tools, max_size=4) | st.sampled_from([None, "tools", [1]])
messages_choices = st.sampled_from(
    [None, {"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "search"}]
)


def messages_outcome(body: dict[str, Any]) -> Any:
    try:
        validated = messages_decode.validate(body)
        return messages_decode.decode_request(validated, {}, SEALER, messages_decode.Decoded())
    except ClientError as error:
        return (error.status, error.message, error.param, error.code)


@SETTINGS
@given(messages_lists, messages_choices)
def test_seen_or_not_a_messages_request_decodes_or_fails_alike(raw_tools, choice):
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    body = with_tools(body, raw_tools, choice)
    first = alike(messages_outcome, messages_decode, messages_decode._validated_tools, body)
    if not isinstance(first, tuple):
        specs, hosted = messages_decode._tools(mw.MessagesRequest.model_validate(body).tools)
        assert (first.tools, first.hosted_tools) == (specs, hosted)


# -- the Gemini dialect: declarations whose schemas are read and converted -----------------------

gemini_schemas = st.sampled_from(
    [
        {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        {"type": "ARRAY"},
        "not a schema",
        {"type": 3},
    ]
)
declarations = st.fixed_dictionaries(
    {"name": st.sampled_from(["get_weather", "search", 7])},
    optional={
        "description": st.sampled_from(["Weather", 3]),
        "parameters": gemini_schemas,
        "parametersJsonSchema": gemini_schemas,
        "parameters_json_schema": gemini_schemas,
    },
)
gemini_tools = st.lists(
    st.one_of(
        st.fixed_dictionaries({"functionDeclarations": st.lists(declarations, max_size=3) | st.just("x")}),
        st.sampled_from([{"googleSearch": {}}, {"unknownTool": {}}, "tool"]),
    ),
    max_size=3,
) | st.sampled_from([None, "tools", {}])


def gemini_outcome(body: dict[str, Any]) -> Any:
    try:
        return gemini_decode.decode_request(body, "m", False, SEALER, gemini_decode.Decoded())
    except ClientError as error:
        return (error.status, error.message, error.param, error.code)


@SETTINGS
@given(gemini_tools)
def test_seen_or_not_a_gemini_request_decodes_or_fails_alike(raw_tools):
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": raw_tools}
    alike(gemini_outcome, gemini_tool_decode, gemini_tool_decode._tools, body)


# -- the Responses dialect: the items may add tools (`additional_tools`) and name namespaced ones --

responses_members = st.fixed_dictionaries(
    {"type": st.sampled_from(["function", "function", "custom", "web_search"]), "name": names},
    optional={
        "description": st.sampled_from(["Weather", 3]),
        "parameters": schemas,
        "strict": st.sampled_from([True, "yes"]),
        "format": st.sampled_from([{"type": "text"}, {"type": "regex"}]),
    },
)
responses_tools = st.one_of(
    responses_members,
    st.fixed_dictionaries(
        {
            "type": st.just("namespace"),
            "name": st.sampled_from(["fs", "", "fs__"]),
            "tools": st.lists(responses_members, max_size=2),
        }
    ),
    st.sampled_from([{"type": "file_search"}, {"type": 7}, "tool"]),
)
responses_lists = st.lists(responses_tools, max_size=4) | st.sampled_from([None, "tools", {}])
responses_inputs = st.lists(
    st.sampled_from(
        [
            {"role": "user", "content": "hi"},
            {"type": "additional_tools", "tools": [{"type": "function", "name": "late"}]},
            {"type": "additional_tools", "tools": [{"type": "function", "name": "search"}]},
            {"type": "function_call", "call_id": "c1", "name": "search", "arguments": "{}"},
            {
                "type": "function_call",
                "call_id": "c2",
                "namespace": "fs",
                "name": "search",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
    ),
    min_size=1,
    max_size=4,
)
responses_choices = st.sampled_from(
    [
        None,
        "required",
        {"type": "function", "name": "search"},
        {"type": "function", "namespace": "fs", "name": "search"},
    ]
)


def responses_outcome(body: dict[str, Any]) -> Any:
    try:
        return responses_decode.decode_request(body, {}, SEALER)
    except ClientError as error:
        return (error.status, error.message, error.param, error.code)


@SETTINGS
@given(responses_lists, responses_inputs, responses_choices)
def test_seen_or_not_a_responses_request_decodes_or_fails_alike(raw_tools, items, choice):
    body = with_tools({"model": "m", "input": items}, raw_tools, choice)
    # without the memo: nothing found, every tool added and finished in the request's own order
    alike(responses_outcome, responses_decode, lambda raw: (None, raw), body)
