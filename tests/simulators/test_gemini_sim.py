"""The strict Gemini simulator: request rules, thought signatures, wire format and faults."""

from __future__ import annotations

import base64
import time
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators import gemini
from gateway.simulators.base import Fault, Reply, SimulatorHub, SimulatorState, ToolCallSpec
from tests.conftest import fixture_path

G3 = "gemini-3-pro-preview"
G25 = "gemini-2.5-flash"
KEY = "sim-key"
PLACEHOLDER_B64 = "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="
BAD_SIGNATURE = "Corrupted thought signature."
CALL_ORDER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
RESPONSE_ORDER = "Please ensure that function response turn comes immediately after a function call turn"
COUNT = (
    "Please ensure that the number of function response parts is equal to the number of function call parts "
    "of the function call turn."
)


def missing_signature(name: str, position: int) -> str:
    return (
        "Function call is missing a thought_signature in functionCall parts. This is required for "
        "tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
        f"function call `default_api:{name}` , position {position}. Please refer to "
        "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
    )


def user(text: str = "hi") -> dict:
    return {"role": "user", "parts": [{"text": text}]}


def call(name: str, args: dict | None = None, signature: str | None = None) -> dict:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args or {}}}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def response(name: str) -> dict:
    return {"functionResponse": {"name": name, "response": {"result": "ok"}}}


def model_turn(*parts: dict) -> dict:
    return {"role": "model", "parts": list(parts)}


def results(*names: str) -> dict:
    return {"role": "user", "parts": [response(n) for n in names]}


def body(*contents: dict, **extra: Any) -> dict:
    return {"contents": list(contents), **extra}


@pytest.fixture
def state() -> SimulatorState:
    return SimulatorState("gemini")


def sign_call(state: SimulatorState, name: str, args: dict | None = None, model: str = G3) -> str:
    return state.sign(
        model, "functionCall", name, orjson.dumps(args or {}, option=orjson.OPT_SORT_KEYS).decode()
    )


def rejection_message(state: SimulatorState, request: dict, model: str = G3) -> str | None:
    rejection = gemini.validate(state, request, model)
    if rejection is None:
        return None
    assert (rejection.status, rejection.type) == (400, "INVALID_ARGUMENT")
    return rejection.message


# -- validate: body shape --------------------------------------------------------------------
def test_minimal_request_is_valid(state: SimulatorState) -> None:
    assert gemini.validate(state, body(user()), G3) is None


def test_snake_case_field_names_are_accepted_like_the_real_parser(state: SimulatorState) -> None:
    request = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "generation_config": {"thinking_config": {"include_thoughts": True, "thinking_level": "low"}},
        "tools": [{"function_declarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
    }
    assert gemini.validate(state, request, G3) is None


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda b: b.update(foo=1),
            'Invalid JSON payload received. Unknown name "foo": Cannot find field.',
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"].update(
                additionalProperties=False
            ),
            (
                'Invalid JSON payload received. Unknown name "additionalProperties" at '
                "'tools[0].function_declarations[0].parameters': Cannot find field."
            ),
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"].update(
                {"$schema": "http://json-schema.org/draft-07/schema#"}
            ),
            (
                'Invalid JSON payload received. Unknown name "$schema" at '
                "'tools[0].function_declarations[0].parameters': Cannot find field."
            ),
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["q"].update(
                additionalProperties=True
            ),
            (
                'Invalid JSON payload received. Unknown name "additionalProperties" at '
                "'tools[0].function_declarations[0].parameters.properties[0].value': Cannot find field."
            ),
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["q"].update(
                type=["string", "null"]
            ),
            (
                'Invalid JSON payload received. Unknown name "type" at '
                "'tools[0].function_declarations[0].parameters.properties[0].value': "
                "Proto field is not repeating, cannot start list."
            ),
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"].update(type="dict"),
            (
                "Invalid value at 'tools[0].function_declarations[0].parameters.type' "
                '(type.googleapis.com/google.ai.generativelanguage.v1beta.Type), "dict"'
            ),
        ),
        (
            lambda b: b["contents"][0]["parts"][0].update(text=5),
            "Invalid value at 'contents[0].parts[0].text' (TYPE_STRING), 5",
        ),
        (
            lambda b: b["contents"][0]["parts"][0].update(
                inlineData={"mimeType": "image/png", "data": "AA=="}
            ),
            (
                "Invalid value at 'contents[0].parts[0].data' (oneof), oneof field 'data' is already set. "
                "Cannot set 'inlineData'"
            ),
        ),
        (
            lambda b: b["contents"][0]["parts"][0].update(thoughtSignature="!!not base64!!"),
            (
                "Invalid value at 'contents[0].parts[0].thought_signature' (TYPE_BYTES), "
                'Base64 decoding failed for "!!not base64!!"'
            ),
        ),
        (
            lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"].update(required=["nope"]),
            (
                "* GenerateContentRequest.tools[0].function_declarations[0].parameters.required[0]: "
                "property is not defined\n"
            ),
        ),
        (lambda b: b.update(contents=[]), "* GenerateContentRequest.contents: contents is not specified\n"),
        (
            lambda b: b["contents"][0].update(parts=[]),
            "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n",
        ),
        (
            lambda b: b["contents"][0].update(parts=[{"thought": True}]),
            (
                "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' "
                "must have one "
                "initialized field\n"
            ),
        ),
        (lambda b: b["contents"][0].update(role="assistant"), "Please use a valid role: user, model."),
        (
            lambda b: b.update(
                generationConfig={"thinkingConfig": {"thinkingBudget": 128, "thinkingLevel": "low"}}
            ),
            "You can only set only one of thinking budget and thinking level.",
        ),
    ],
)
def test_body_shape_rejections(state: SimulatorState, mutate: Any, expected: str) -> None:
    request = body(
        user(),
        tools=[
            {
                "functionDeclarations": [
                    {
                        "name": "search",
                        "description": "look up",
                        "parameters": {
                            "type": "object",
                            "properties": {"q": {"type": "string"}},
                            "required": ["q"],
                        },
                    }
                ]
            }
        ],
    )
    assert rejection_message(state, request) is None
    mutate(request)
    assert rejection_message(state, request) == expected


def test_parse_errors_are_all_reported_together(state: SimulatorState) -> None:
    request = body(user(), foo=1, bar=2)
    assert rejection_message(state, request) == (
        'Invalid JSON payload received. Unknown name "foo": Cannot find field.\n'
        'Invalid JSON payload received. Unknown name "bar": Cannot find field.'
    )


# -- validate: function call / response turns -------------------------------------------------
def test_call_turn_must_follow_a_user_turn(state: SimulatorState) -> None:
    request = body(user(), model_turn({"text": "thinking aloud"}), model_turn(call("f")), results("f"))
    assert rejection_message(state, request, G25) == CALL_ORDER
    assert rejection_message(state, body(model_turn(call("f")), results("f")), G25) == CALL_ORDER


def test_response_turn_must_follow_a_call_turn(state: SimulatorState) -> None:
    assert rejection_message(state, body(user(), results("f")), G25) == RESPONSE_ORDER
    request = body(user(), model_turn({"text": "no calls"}), results("f"))
    assert rejection_message(state, request, G25) == RESPONSE_ORDER


def test_response_count_must_match_call_count(state: SimulatorState) -> None:
    request = body(user(), model_turn(call("f"), call("g")), results("f"))
    assert rejection_message(state, request, G25) == COUNT
    request = body(user(), model_turn(call("f")), results("f", "f"))
    assert rejection_message(state, request, G25) == COUNT
    request = body(user(), model_turn(call("f")), user("never answered"))
    assert rejection_message(state, request, G25) == COUNT


def test_paired_calls_and_responses_are_valid(state: SimulatorState) -> None:
    request = body(
        user(), model_turn(call("f"), call("g")), results("f", "g"), model_turn({"text": "done"}), user()
    )
    assert rejection_message(state, request, G25) is None


# -- validate: thought signatures -------------------------------------------------------------
def test_gemini3_requires_a_signature_on_the_first_call_of_each_step(state: SimulatorState) -> None:
    request = body(user(), model_turn(call("Task")), results("Task"))
    assert rejection_message(state, request) == missing_signature("Task", 2)
    assert rejection_message(state, request, G25) is None  # only Gemini 3 requires them


def test_parallel_calls_need_only_the_first_signature(state: SimulatorState) -> None:
    first = sign_call(state, "f")
    request = body(user(), model_turn(call("f", signature=first), call("g")), results("f", "g"))
    assert rejection_message(state, request) is None


def test_each_sequential_step_of_the_current_turn_needs_its_signature(state: SimulatorState) -> None:
    request = body(
        user(),
        model_turn(call("f", signature=sign_call(state, "f"))),
        results("f"),
        model_turn(call("g")),
        results("g"),
    )
    assert rejection_message(state, request) == missing_signature("g", 4)


def test_earlier_turns_are_not_validated_nor_counted(state: SimulatorState) -> None:
    request = body(
        user("first question"),
        model_turn(call("f", signature="Zm9yZ2Vk")),  # forged, but in an earlier turn
        results("f"),
        model_turn(call("g")),  # unsigned, earlier turn
        results("g"),
        model_turn({"text": "answer"}),
        user("next question"),
    )
    rejection, findings, _ = gemini.check(state, request, G3)
    assert rejection is None
    assert (findings.verified, findings.placeholders) == (0, 0)


@pytest.mark.parametrize(
    "signature",
    [
        "skip_thought_signature_validator",
        PLACEHOLDER_B64,
        "context_engineering_is_the_way_to_go",
        base64.b64encode(b"context_engineering_is_the_way_to_go").decode(),
    ],
)
def test_documented_placeholders_are_accepted_and_counted(state: SimulatorState, signature: str) -> None:
    request = body(user(), model_turn(call("f", signature=signature)), results("f"))
    rejection, findings, _ = gemini.check(state, request, G3)
    assert rejection is None
    assert (findings.verified, findings.placeholders) == (0, 1)


def test_issued_signature_verifies_also_in_url_safe_base64(state: SimulatorState) -> None:
    signature = sign_call(state, "f", {"city": "Paris", "days": 3})
    url_safe = signature.replace("+", "-").replace("/", "_").rstrip("=")
    for sent in (signature, url_safe):
        request = body(user(), model_turn(call("f", {"days": 3, "city": "Paris"}, sent)), results("f"))
        rejection, findings, _ = gemini.check(state, request, G3)
        assert rejection is None
        assert findings.verified == 1


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s: (sign_call(s, "f", {"city": "Paris"}), "f", {"city": "Rome"}),  # edited arguments
        lambda s: (sign_call(s, "g", {"city": "Paris"}), "f", {"city": "Paris"}),  # another function
        lambda s: (sign_call(s, "f", {"city": "Paris"}, G25), "f", {"city": "Paris"}),  # another model
        lambda s: (sign_call(SimulatorState("anthropic"), "f", {"city": "Paris"}), "f", {"city": "Paris"}),
        lambda s: ("Zm9yZ2VkIHNpZ25hdHVyZQ==", "f", {"city": "Paris"}),  # forged
    ],
)
def test_foreign_forged_or_edited_signatures_are_rejected(state: SimulatorState, tamper: Any) -> None:
    signature, name, args = tamper(state)
    request = body(user(), model_turn(call(name, args, signature)), results(name))
    assert rejection_message(state, request) == BAD_SIGNATURE


def test_text_signature_covers_the_answer_text(state: SimulatorState) -> None:
    signature = state.sign(G3, "text", "The answer is 4.")
    good = body(user(), model_turn({"text": "The answer is 4."}, {"text": "", "thoughtSignature": signature}))
    rejection, findings, _ = gemini.check(state, good, G3)
    assert rejection is None and findings.verified == 1
    edited = body(
        user(), model_turn({"text": "The answer is 5."}, {"text": "", "thoughtSignature": signature})
    )
    assert rejection_message(state, edited) == BAD_SIGNATURE


# -- over HTTP -------------------------------------------------------------------------------
def sse_events(raw: bytes) -> list[dict]:
    assert raw.endswith(b"\r\n\r\n")
    return [orjson.loads(block.removeprefix(b"data: ")) for block in raw.split(b"\r\n\r\n") if block]


def url(hub: SimulatorHub, model: str, stream: bool) -> str:
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"{hub.base_url('gemini')}/v1beta/models/{model}:{action}"


async def post(
    session: aiohttp.ClientSession, hub: SimulatorHub, request: dict, model: str = G3, stream: bool = True
) -> tuple[int, bytes, aiohttp.ClientResponse]:
    async with session.post(url(hub, model, stream), json=request, headers={"x-goog-api-key": KEY}) as resp:
        return resp.status, await resp.read(), resp


@pytest.fixture
async def hub() -> Any:
    async with SimulatorHub(api_key=KEY) as running:
        yield running


@pytest.fixture
async def session() -> Any:
    async with aiohttp.ClientSession() as client:
        yield client


async def test_auth_failures_are_401_in_google_format(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    for headers in ({}, {"x-goog-api-key": "wrong"}):
        async with session.post(url(hub, G3, False), json=body(user()), headers=headers) as resp:
            payload = await resp.json()
            assert resp.status == 401
            assert payload["error"]["code"] == 401 and payload["error"]["status"] == "UNAUTHENTICATED"
    state = hub.states["gemini"]
    assert [r.rejection.status for r in state.requests if r.rejection] == [401, 401]


async def test_invalid_json_and_unknown_action(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    headers = {"x-goog-api-key": KEY, "Content-Type": "application/json"}
    async with session.post(url(hub, G3, False), data=b"{nope", headers=headers) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["status"] == "INVALID_ARGUMENT"
    bad = f"{hub.base_url('gemini')}/v1beta/models/{G3}:countEverything"
    async with session.post(bad, json=body(user()), headers=headers) as resp:
        assert resp.status == 404


@pytest.mark.parametrize(
    "action,payload,error",
    [
        ("embedContent", {"content": {"parts": [{"text": "x"}]}, "bogus": 1}, 'Unknown name "bogus"'),
        ("embedContent", {"content": {"parts": []}}, "content"),
        ("embedContent", {"content": {"parts": [{"text": "x"}]}, "taskType": "GUESS"}, "task_type"),
        ("embedContent", {"model": "models/other", "content": {"parts": [{"text": "x"}]}}, "must match"),
        ("batchEmbedContents", {"requests": [{"content": {"parts": [{"text": "x"}]}}]}, "must match"),
        ("batchEmbedContents", {"requests": []}, "requests"),
    ],
)
async def test_embeddings_are_as_strict_as_google(
    hub: SimulatorHub, session: aiohttp.ClientSession, action: str, payload: dict, error: str
) -> None:
    headers = {"x-goog-api-key": KEY}
    target = f"{hub.base_url('gemini')}/v1beta/models/gemini-embedding-001:{action}"
    async with session.post(target, json=payload, headers=headers) as resp:
        assert resp.status == 400
        assert error in (await resp.json())["error"]["message"]
    good = {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "x"}]}}
    async with session.post(
        target, json={"requests": [good]} if "batch" in action else good, headers=headers
    ) as resp:
        assert resp.status == 200


async def test_text_stream_matches_the_recorded_shape(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    recorded = [
        orjson.loads(line)
        for line in fixture_path("google", "google-reasoning-gemini3.chunks.txt").read_bytes().splitlines()
    ]
    hub.states["gemini"].push(
        Reply(text="There are three r's in strawberry.", reasoning="count", chunk_size=10)
    )
    status, raw, resp = await post(session, hub, body(user("how many r?")))
    assert status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(raw)
    assert [set(e) for e in events] == [set(recorded[0])] * len(events)
    assert [set(e["candidates"][0]) for e in events[:-1]] == [{"content", "index"}] * (len(events) - 1)
    assert set(events[-1]["candidates"][0]) == set(recorded[-1]["candidates"][0])
    texts = [e["candidates"][0]["content"]["parts"][0]["text"] for e in events]
    assert texts == ["There are ", "three r's ", "in strawbe", "rry.", ""]
    assert all(e["candidates"][0]["content"]["role"] == "model" for e in events)
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert not any(p.get("thought") for e in events for p in e["candidates"][0]["content"]["parts"])
    usage = events[-1]["usageMetadata"]
    assert (
        usage["totalTokenCount"]
        == usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    )
    assert events[-1]["modelVersion"] == G3


async def test_text_answer_signature_comes_back_verified(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    state = hub.states["gemini"]
    state.push(Reply(text="It is 4."), Reply(text="You are welcome."))
    _, raw, _ = await post(session, hub, body(user("2+2?")))
    events = sse_events(raw)
    final = events[-1]["candidates"][0]["content"]["parts"]
    assert final[0]["text"] == "" and final[0]["thoughtSignature"]
    history = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    status, raw, _ = await post(session, hub, body(user("2+2?"), model_turn(*history), user("thanks")))
    # the signed turn is no longer the current turn: accepted, and not validated
    assert status == 200 and state.verified_tokens == 0
    state.push(Reply(text="again"))
    status, _, _ = await post(session, hub, body(user("2+2?"), model_turn(*history)))
    assert status == 200 and state.verified_tokens == 1


async def test_thoughts_only_with_include_thoughts(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    state = hub.states["gemini"]
    state.push(
        Reply(text="ok", reasoning="Let me think about it", chunk_size=8),
        Reply(text="ok", reasoning="hidden"),
    )
    thinking = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    _, raw, _ = await post(session, hub, body(user(), **thinking))
    parts = [p for e in sse_events(raw) for p in e["candidates"][0]["content"]["parts"]]
    assert [p["text"] for p in parts if p.get("thought")] == ["Let me t", "hink abo", "ut it"]
    _, raw, _ = await post(session, hub, body(user()))
    assert not any(p.get("thought") for e in sse_events(raw) for p in e["candidates"][0]["content"]["parts"])


async def test_tool_calls_stream_signature_and_replay(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    recorded = fixture_path("google", "google-tool-call-gemini3.chunks.txt").read_bytes().splitlines()
    recorded_part = orjson.loads(recorded[0])["candidates"][0]["content"]["parts"][0]
    state = hub.states["gemini"]
    calls = [ToolCallSpec("weather", {"location": "Paris"}), ToolCallSpec("time", {"zone": "CET"})]
    state.push(Reply(tool_calls=calls), Reply(text="Sunny."))
    _, raw, _ = await post(session, hub, body(user("weather?")))
    events = sse_events(raw)
    parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    first, second, last = parts
    assert set(first) == set(recorded_part) and set(first["functionCall"]) == {"id", "name", "args"}
    assert first["functionCall"]["args"] == {"location": "Paris"}
    assert "thoughtSignature" not in second and second["functionCall"]["name"] == "time"
    assert last == {"text": ""} and events[-1]["candidates"][0]["finishReason"] == "STOP"

    history = body(user("weather?"), model_turn(first, second), results("weather", "time"))
    status, _, _ = await post(session, hub, history)
    assert status == 200 and state.verified_tokens == 1

    edited = body(
        user("weather?"),
        model_turn(
            {**first, "functionCall": {**first["functionCall"], "args": {"location": "Rome"}}}, second
        ),
        results("weather", "time"),
    )
    status, raw, _ = await post(session, hub, edited)
    assert status == 400 and orjson.loads(raw)["error"]["message"] == BAD_SIGNATURE
    assert state.verified_tokens == 1 and state.requests[-1].rejection is not None

    placeholder = body(
        user("weather?"),
        model_turn({**first, "thoughtSignature": PLACEHOLDER_B64}, second),
        results("weather", "time"),
    )
    status, _, _ = await post(session, hub, placeholder)
    assert status == 200 and state.placeholder_tokens == 1


async def test_non_stream_body(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    recorded = orjson.loads(fixture_path("google", "google-tool-call-gemini3.json").read_bytes())
    state = hub.states["gemini"]
    state.push(
        Reply(tool_calls=[ToolCallSpec("weather", {"location": "SF"})]), Reply(text="cut", stop="length")
    )
    status, raw, _ = await post(session, hub, body(user()), stream=False)
    payload = orjson.loads(raw)
    assert status == 200 and set(payload) == set(recorded)
    part = payload["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"]["name"] == "weather" and part["thoughtSignature"]
    status, raw, _ = await post(session, hub, body(user()), model=G25, stream=False)
    candidate = orjson.loads(raw)["candidates"][0]
    assert candidate["finishReason"] == "MAX_TOKENS"
    assert candidate["content"]["parts"] == [{"text": "cut"}]  # Gemini 2.5 issues no signatures here


async def test_stream_without_alt_sse_is_one_json_array(
    hub: SimulatorHub, session: aiohttp.ClientSession
) -> None:
    hub.states["gemini"].push(Reply(text="abc", chunk_size=2))
    target = f"{hub.base_url('gemini')}/v1beta/models/{G25}:streamGenerateContent"
    async with session.post(target, json=body(user()), headers={"x-goog-api-key": KEY}) as resp:
        chunks = orjson.loads(await resp.read())
    assert [c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks] == ["ab", "c", ""]


async def test_request_is_recorded(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    request = body(user("record me"))
    await post(session, hub, request, stream=False)
    recorded = hub.states["gemini"].requests[-1]
    assert recorded.path == f"/gemini/v1beta/models/{G3}:generateContent"
    assert recorded.body == request and recorded.rejection is None
    assert recorded.headers["x-goog-api-key"] == KEY


# -- faults ----------------------------------------------------------------------------------
async def test_429_carries_retry_info_in_the_body(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    recorded = orjson.loads(fixture_path("google", "google-429-retry-info.json").read_bytes())
    hub.states["gemini"].push(Fault(status=429, retry_after=34.4))
    status, raw, _ = await post(session, hub, body(user()))
    error = orjson.loads(raw)["error"]
    assert status == 429 and (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    retry = [d for d in error["details"] if d["@type"].endswith("RetryInfo")]
    assert retry == [d for d in recorded["error"]["details"] if d["@type"].endswith("RetryInfo")]


async def test_503_overloaded(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["gemini"].push(Fault(status=503))
    status, raw, _ = await post(session, hub, body(user()), stream=False)
    assert status == 503
    assert orjson.loads(raw) == {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }


async def test_delay_before_headers(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["gemini"].push(Fault(delay=0.3))
    started = time.monotonic()
    status, _, _ = await post(session, hub, body(user()))
    assert status == 200 and time.monotonic() - started >= 0.3


async def test_reset_before_headers(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["gemini"].push(Fault(reset_before_headers=True))
    with pytest.raises(aiohttp.ClientConnectionError):
        await post(session, hub, body(user()))


async def test_mid_stream_error_after_n_events(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["gemini"].push(Fault(after_events=2, status=503, reply=Reply(text="a" * 60, chunk_size=10)))
    status, raw, _ = await post(session, hub, body(user()))
    events = sse_events(raw)
    assert status == 200 and len(events) == 3
    assert all("candidates" in e for e in events[:2])
    assert events[2]["error"]["status"] == "UNAVAILABLE" and events[2]["error"]["code"] == 503


async def test_mid_stream_reset_after_n_events(hub: SimulatorHub, session: aiohttp.ClientSession) -> None:
    hub.states["gemini"].push(
        Fault(after_events=1, mid_stream="reset", reply=Reply(text="b" * 50, chunk_size=5))
    )
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):
        async with session.post(
            url(hub, G3, True), json=body(user()), headers={"x-goog-api-key": KEY}
        ) as resp:
            async for piece in resp.content.iter_any():
                received += piece
    assert received.count(b"data: ") == 1
