from __future__ import annotations

import orjson
import pytest

from gateway.ingress.chat.decode import DecodeStats, decode_request, include_usage
from gateway.ingress.errors import ClientError, check_depth, parse_json_body
from gateway.transcript.model import Image, Reasoning, Role, Text, ToolCall, ToolChoiceMode, ToolResult
from gateway.transcript.seal import Sealer

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
SEALER = Sealer(b"test-secret")


def decode(body, stats=None):
    return decode_request(body, SEALER, stats)


def test_a_full_request_decodes_into_the_canonical_transcript():
    body = {
        "model": "smart",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"P"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
        ],
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning_effort": "high",
        "max_completion_tokens": 100,
        "temperature": 0.5,
        "stop": "END",
        "user": "ignored-extra-field",
    }
    req = decode(body)
    assert req.system_text() == "sys\n\ndev"
    assert req.messages[0].blocks == (Text("look"), Image("data:image/png;base64,AAAA"))
    assert req.messages[1].role is Role.ASSISTANT
    assert req.messages[1].blocks == (Reasoning("hmm"), ToolCall("call_1", "get_weather", '{"city":"P"}'))
    assert req.messages[2].blocks == (ToolResult("call_1", "sunny"),)
    assert req.tool_choice.mode is ToolChoiceMode.TOOL and req.tool_choice.name == "get_weather"
    assert include_usage(body) is True  # an answer option of the chat dialect, not of the transcript
    assert (req.stream, req.reasoning_effort, req.max_tokens, req.stop) == (
        True,
        "high",
        100,
        ("END",),
    )


@pytest.mark.parametrize(
    "body,param",
    [
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0]"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 7}, "temperature"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            },
            "messages[0].content[0].type",
        ),
        ({"model": "m", "messages": [{"role": "assistant", "content": None}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3}, "n"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [TOOL, TOOL]}, "tools"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "tools": [TOOL],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "tool_choice.function.name",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_json_path(body, param):
    with pytest.raises(ClientError) as info:
        decode(body)
    assert info.value.status == 400
    assert info.value.param is not None and info.value.param.startswith(param)
    assert info.value.body()["error"]["type"] == "invalid_request_error"


def test_unparseable_echoed_tokens_are_counted():
    stats = DecodeStats()
    decode(
        {
            "model": "m",
            "messages": [
                {
                    "role": "assistant",
                    "content": "x",
                    "reasoning_details": [{"type": "reasoning.text", "text": "t", "signature": "forged"}],
                }
            ],
        },
        stats,
    )
    assert stats.ignored_tokens == 1


def test_json_depth_and_syntax_limits():
    deep = b"[" * 100 + b"]" * 100
    with pytest.raises(ClientError, match="nesting deeper than 64"):
        parse_json_body(deep, 64)
    with pytest.raises(ClientError, match="not valid JSON"):
        parse_json_body(b"{", 64)
    check_depth({"a": [{"b": 1}]}, 3)


@pytest.mark.parametrize(
    "field,value",
    [
        ("logprobs", True),
        ("top_logprobs", 3),
        ("functions", [{"name": "f"}]),
        ("function_call", "auto"),
        ("audio", {"voice": "alloy", "format": "wav"}),
        ("modalities", ["text", "audio"]),
        ("prediction", {"type": "content", "content": "x"}),
    ],
)
def test_parameters_the_gateway_cannot_honour_are_refused_by_name(field, value):
    with pytest.raises(ClientError) as info:
        decode({"model": "m", "messages": [{"role": "user", "content": "x"}], field: value})
    assert info.value.status == 400 and info.value.param == field
    assert info.value.code == "unsupported_parameter"


@pytest.mark.parametrize(
    "field,value",
    [
        ("response_format", {"type": "text"}),
        ("logprobs", False),
        ("modalities", ["text"]),
        ("seed", 7),
        ("user", "u1"),
    ],
)
def test_harmless_values_pass(field, value):
    decode({"model": "m", "messages": [{"role": "user", "content": "x"}], field: value})


def test_the_session_preamble_is_the_system_text_before_the_conversation():
    from gateway.session import derive_session_key

    base = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"}]
    later = base + [{"role": "assistant", "content": "hello"}, {"role": "system", "content": "3 steps left"}]
    keys = []
    for messages in (base, later):
        request = decode({"model": "m", "messages": messages})
        assert request.system_text() == "You are helpful."
        keys.append(derive_session_key(request))
    assert keys[0] == keys[1], "a mid-conversation system reminder does not start a new session"
    other = decode({"model": "m", "messages": [{"role": "system", "content": "Other."}, base[1]]})
    assert derive_session_key(other) != keys[0]


def test_a_mid_conversation_system_message_stays_where_it_was_given():
    request = decode(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "system", "content": "3 steps left"},
                {"role": "user", "content": "go on"},
            ],
        }
    )
    assert [m.role for m in request.messages] == [Role.USER, Role.ASSISTANT, Role.SYSTEM, Role.USER]
    assert request.messages[2].blocks == (Text("3 steps left"),)


def test_an_assistant_turn_with_empty_content_is_accepted_as_an_empty_turn():
    request = decode(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "again"},
            ],
        }
    )
    assert request.messages[1].role is Role.ASSISTANT and request.messages[1].blocks == (Text(""),)


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"stream": "yes"}, "stream"),
        ({"stream": 1}, "stream"),
        ({"max_tokens": "100"}, "max_tokens"),
        ({"max_completion_tokens": 100.0}, "max_completion_tokens"),
        ({"temperature": "0.5"}, "temperature"),
        ({"parallel_tool_calls": "false"}, "parallel_tool_calls"),
        ({"stream": True, "stream_options": {"include_usage": "true"}}, "stream_options.include_usage"),
        ({"n": "1"}, "n"),
        ({"stop": 5}, "stop"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]},
            "tools[0].function.parameters",
        ),
    ],
)
def test_wire_types_are_strict_and_a_mistake_names_its_json_path(extra, param):
    with pytest.raises(ClientError) as info:
        decode({"model": "m", "messages": [{"role": "user", "content": "x"}], **extra})
    assert info.value.status == 400
    assert info.value.param == param
    assert info.value.code == "invalid_type"


def test_numbers_stay_numbers_an_integer_temperature_is_fine():
    request = decode(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 1, "top_p": 1}
    )
    assert request.temperature == 1 and request.top_p == 1


@pytest.mark.parametrize(
    "body,code",
    [
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}, "unsupported_value"),
        ({"model": "m", "messages": []}, "invalid_value"),
        ({"messages": [{"role": "user", "content": "x"}]}, "missing_required_parameter"),
        ({"model": "m", "messages": [{"role": "assistant", "content": None}]}, "missing_required_parameter"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [TOOL, TOOL]},
            "invalid_value",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"},
            "invalid_value",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}, "invalid_value"),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
            },
            "unsupported_value",
        ),
        ([1, 2], "invalid_type"),
    ],
)
def test_every_refusal_carries_a_code(body, code):
    with pytest.raises(ClientError) as info:
        decode(body)
    assert info.value.status == 400 and info.value.code == code


def test_response_format_json_schema_and_json_object_decode_into_the_canonical_field():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": schema, "strict": True}}
    request = decode({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": fmt})
    rf = request.response_format
    assert (rf.type, rf.name, dict(rf.schema), rf.strict) == ("json_schema", "Answer", schema, True)
    request = decode(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "json"}],
            "response_format": {"type": "json_object"},
        }
    )
    assert request.response_format.type == "json_object" and request.response_format.schema is None
    text = decode(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "text"}}
    )
    assert text.response_format is None


@pytest.mark.parametrize(
    "fmt,param",
    [
        ({"type": "json_schema"}, "response_format.json_schema"),
        ({"type": "json_schema", "json_schema": {"name": "bad name!"}}, "response_format.json_schema.name"),
        ({"type": "xml"}, "response_format"),
    ],
)
def test_an_invalid_response_format_is_a_400_with_its_path(fmt, param):
    with pytest.raises(ClientError) as info:
        decode({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": fmt})
    assert info.value.status == 400 and (info.value.param or "").startswith(param)


def test_cache_control_on_parts_messages_and_tools_becomes_canonical_breakpoints():
    eph = {"type": "ephemeral"}
    body = {
        "model": "m",
        "messages": [
            {
                "role": "system",
                "content": [
                    {
                        "type": "text",
                        "text": "long rules",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    },
                    {"type": "text", "text": "today"},
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": eph}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "cache_control": eph},
            {"role": "user", "content": "more", "cache_control": eph},
        ],
        "tools": [{**TOOL, "cache_control": eph}],
    }
    request = decode(body)
    assert [(b.text, b.cache.ttl if b.cache else None) for b in request.system] == [
        ("long rules", "1h"),
        ("today", None),
    ]
    assert request.messages[0].blocks[0].cache is not None
    assert request.messages[2].blocks[0].cache is not None
    assert request.messages[3].blocks[-1].cache is not None
    assert request.tools[0].cache is not None
    with pytest.raises(ClientError) as info:
        decode({**body, "tools": [{**TOOL, "cache_control": {"type": "ephemeral", "ttl": "2d"}}]})
    assert info.value.param.startswith("tools[0].cache_control")


def test_an_assistant_refusal_sent_back_is_its_text():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            {"role": "user", "content": "ok"},
        ],
    }
    assert decode(body).messages[1].blocks == (Text("I can't help with that."),)


def test_a_long_content_list_is_validated_in_slices_with_the_same_result_and_errors(monkeypatch):
    """pydantic-core holds the GIL for a whole call: a 200,000-part message in one call held the
    event loop ~330 ms (gateway/offload.py), so no call validates more than a slice of parts.
    What it decodes, and the error a bad part far down the list gets, are those of the whole."""
    from gateway.ingress.chat import decode as chat_decode
    from gateway.ingress.chat import wire
    from gateway.ingress.chat.validation import PARTS_PER_CALL

    sizes: list[int] = []

    class Counted:
        def __init__(self, adapter):
            self.adapter = adapter

        def validate_python(self, value):
            content = value.get("content") if isinstance(value, dict) else value
            sizes.append(len(content) if isinstance(content, list) else 1)
            return self.adapter.validate_python(value)

    parts = [{"type": "text", "text": str(n), **({"cache_control": {"type": "ephemeral"}} if n == 4999 else {})}
             for n in range(5000)]  # fmt: skip
    messages = [
        {"role": "system", "content": parts[:3]},
        {"role": "user", "content": parts, "cache_control": {"type": "ephemeral"}},
        {"role": "assistant", "content": parts[:2500]},
    ]
    whole = decode({"model": "m", "messages": messages})
    monkeypatch.setattr(chat_decode.w, "MESSAGE", Counted(wire.MESSAGE))
    monkeypatch.setattr(chat_decode.w, "PARTS", Counted(wire.PARTS))
    assert decode({"model": "m", "messages": messages}) == whole
    assert max(sizes) <= PARTS_PER_CALL < 5000
    assert [b.text for b in whole.messages[0].blocks] == [str(n) for n in range(5000)]

    bad = [*parts[:4321], {"type": "text", "text": 7}, *parts[4321:]]
    with pytest.raises(ClientError) as sliced:
        decode({"model": "m", "messages": [{"role": "user", "content": bad}]})
    monkeypatch.undo()
    with pytest.raises(ClientError) as at_once:
        decode({"model": "m", "messages": [{"role": "user", "content": bad}]})
    assert (sliced.value.message, sliced.value.param) == (at_once.value.message, at_once.value.param)
    assert "messages[0].content[4321]" in sliced.value.message


def _long_bodies():
    from gateway.ingress.chat.validation import PARTS_PER_CALL as N

    text = {"type": "text", "text": "x"}
    many = [text] * (3 * N + 5)

    def at(index, bad, parts=many):
        return [*parts[:index], bad, *parts[index + 1 :]]

    user = {"role": "user", "content": many}
    bad_parts = (
        {"type": 5},
        7,
        {"type": "image_url", "image_url": 5},
        {"type": "text", "text": "x", "cache_control": {"type": "x"}},
    )
    for bad in bad_parts:
        for index in (0, N - 1, N, 3 * N + 4):
            yield {"model": "m", "messages": [{"role": "user", "content": at(index, bad)}]}
    yield {"model": "m", "messages": [{**user, "cache_control": {"type": "nope"}}]}
    yield {"model": "m", "messages": [{**user, "content": at(2 * N, 7), "cache_control": {"type": "nope"}}]}
    yield {"model": "m", "messages": [{**user, "role": "robot"}]}
    yield {"model": "m", "messages": [{**user, "role": "robot", "content": at(5, 7)}]}
    yield {"model": "m", "messages": [user, {"role": "user", "content": at(3 * N, {"type": 5})}]}
    yield {
        "model": "m",
        "messages": [{"role": "user", "content": at(9, 7)}, {"role": "user", "content": at(1, 7)}],
    }
    yield {"model": "m", "messages": [{"role": "user", "content": 5}, user]}
    yield {"model": "m", "messages": [user, {"role": "tool", "content": "x"}]}
    yield {"model": "m", "messages": [user, "not a message", {"role": "user", "content": 5}]}
    yield {"model": 5, "messages": [{"role": "user", "content": at(3 * N, 7)}]}
    yield {"model": "m", "temperature": 5, "messages": [user]}
    yield {"model": "m", "temperature": 5, "messages": [{"role": "user", "content": at(3 * N, 7)}]}
    yield {"model": "m", "messages": [{"role": "assistant", "content": at(N + 1, 7)}]}
    yield {"model": "m", "messages": [{"role": "tool", "content": many}]}
    yield {"model": "m", "messages": [{"role": "system", "content": at(3 * N + 4, {"type": 5})}, user]}
    parts = [text] * 100
    yield {
        "model": "m",
        "messages": [{"role": "user", "content": parts}] * 30
        + [{"role": "user", "content": at(50, 7, parts)}],
    }


@pytest.mark.parametrize("body", list(_long_bodies()), ids=lambda b: str(len(orjson.dumps(b))))
def test_a_long_requests_validation_error_is_the_one_its_whole_validation_reports(body, monkeypatch):
    """Found from a bounded cut of the body (a 200,000-part body validated whole held the GIL
    ~0.6 s): the same message, path and code as validating the whole body."""
    from gateway.ingress.chat import decode as chat_decode
    from gateway.ingress.chat.validation import PARTS_PER_CALL, narrowed

    cut_body = narrowed(body)
    parts = sum(
        len(m["content"]) if isinstance(m, dict) and isinstance(m.get("content"), list) else 1
        for m in cut_body["messages"]
    )
    assert parts <= PARTS_PER_CALL + len(body["messages"])
    with pytest.raises(ClientError) as cut:
        decode(body)
    monkeypatch.setattr(chat_decode, "narrowed", lambda body: body)
    with pytest.raises(ClientError) as whole:
        decode(body)
    assert (cut.value.message, cut.value.param, cut.value.code) == (
        whole.value.message,
        whole.value.param,
        whole.value.code,
    )


@pytest.mark.parametrize("tools", ["absent", None, [], {}, "tool", 1])
def test_tools_absent_null_or_not_a_list_decode_as_the_validator_judges_them(tools):
    from gateway.ingress.chat import wire

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if tools != "absent":
        body["tools"] = tools
    try:
        expected = wire.TOOLS.validate_python(body.get("tools")) or ()
    except Exception:
        with pytest.raises(ClientError) as refused:
            decode(body)
        assert refused.value.param == "tools"
    else:
        assert expected == () and decode(body).tools == ()
