"""The simulators' structured-output rules, with each provider's own error wording, and the
answers they give a JSON-format request (valid for the schema, or a loud simulator error)."""

from __future__ import annotations

import orjson
import pytest

from gateway.simulators.base import Reply, SimulatorState
from gateway.simulators.chat_family import structured_reply
from gateway.simulators.registry import VALIDATORS
from gateway.simulators.structured import StructuredAnswerError, answer, instance, schema_in_instructions

OPEN = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CLOSED = {**OPEN, "additionalProperties": False}
USER = [{"role": "user", "content": "Weather?"}]


def rejection(kind: str, body: dict, model: str) -> str | None:
    found = VALIDATORS[kind](SimulatorState(kind), {"model": model, **body}, model)
    return None if found is None else found.message


def chat(fmt: dict, messages: list[dict] = USER) -> dict:
    return {"messages": messages, "response_format": fmt}


def test_openai_chat_rules():
    assert rejection("openai_chat", chat({"type": "json_object"}), "gpt-4.1") == (
        "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'."
    )
    json_user = [{"role": "user", "content": "Answer in JSON"}]
    assert rejection("openai_chat", chat({"type": "json_object"}, json_user), "gpt-4.1") is None
    strict = {"type": "json_schema", "json_schema": {"name": "W", "schema": OPEN, "strict": True}}
    assert rejection("openai_chat", chat(strict), "gpt-4.1") == (
        "Invalid schema for response_format 'W': In context=(), 'additionalProperties' is required to be "
        "supplied and to be false."
    )
    strict["json_schema"]["schema"] = {
        **CLOSED,
        "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
    }
    assert "Missing 'n'" in rejection("openai_chat", chat(strict), "gpt-4.1")
    nameless = {"type": "json_schema", "json_schema": {"schema": OPEN}}
    assert rejection("openai_chat", chat(nameless), "gpt-4.1") == (
        "Missing required parameter: 'response_format.json_schema.name'."
    )
    assert rejection("openai_chat", chat({"type": "xml"}), "gpt-4.1").startswith("Invalid value: 'xml'.")


def test_deepseek_kimi_and_mistral_rules():
    schema = {"type": "json_schema", "json_schema": {"name": "W", "schema": OPEN}}
    assert (
        rejection("deepseek", chat(schema), "deepseek-chat") == "This response_format type is unavailable now"
    )
    assert rejection("deepseek", chat({"type": "json_object"}), "deepseek-chat") is None
    assert "not supported" in rejection("kimi", chat(schema), "kimi-k2-thinking")
    assert rejection("kimi", chat(schema), "kimi-k2.5") is None
    nameless = {"type": "json_schema", "json_schema": {"schema": OPEN}}
    assert rejection("mistral", chat(nameless), "mistral-large-latest") is not None


def anthropic_body(**extra) -> dict:
    return {"max_tokens": 100, "messages": USER, **extra}


def test_anthropic_rules():
    native = anthropic_body(output_config={"format": {"type": "json_schema", "schema": OPEN}})
    assert rejection("anthropic", native, "claude-sonnet-4-5") == (
        "output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false"
    )
    closed = anthropic_body(output_config={"format": {"type": "json_schema", "schema": CLOSED}})
    assert rejection("anthropic", closed, "claude-sonnet-4-5") is None
    assert "does not support" in rejection("anthropic", closed, "claude-opus-4-1")
    cached = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"t{i}", "cache_control": cached} for i in range(5)]
    assert rejection(
        "anthropic", anthropic_body(messages=[{"role": "user", "content": blocks}]), "claude-sonnet-4-5"
    ) == ("A maximum of 4 blocks with cache_control may be provided. Found 5.")


def test_gemini_and_responses_rules():
    tools = [{"functionDeclarations": [{"name": "lookup"}]}]
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": tools,
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": OPEN},
    }
    assert rejection("gemini", body, "gemini-2.5-flash") == (
        "Function calling with a response mime type: 'application/json' is unsupported"
    )
    assert rejection("gemini", body, "gemini-3-pro-preview") is None
    responses = {
        "store": False,
        "input": [{"role": "user", "content": "x"}],
        "text": {"format": {"type": "json_schema", "schema": OPEN}},
    }
    assert (
        rejection("openai_responses", responses, "gpt-5.1")
        == "Missing required parameter: 'text.format.name'."
    )


def test_answers_are_valid_for_the_schema_and_invalid_scripts_fail_loudly():
    schema = {
        "$defs": {
            "P": {"type": "object", "properties": {"x": {"type": "number", "minimum": 3}}, "required": ["x"]}
        },
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/P"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
            "when": {"type": "string", "format": "date"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["p", "tags", "when", "maybe"],
    }
    value = answer(schema, Reply())
    assert value == instance(schema) and value["tags"] == ["a", "a"] and value["p"]["x"] == 3.0
    with pytest.raises(StructuredAnswerError):
        answer(schema, Reply(data={"p": {}}))
    # JSON mode: the model follows the schema its instructions spell out
    fenced = "Answer with JSON valid against:\n```json\n" + orjson.dumps(CLOSED).decode() + "\n```"
    assert schema_in_instructions(["hi", fenced]) == CLOSED
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": fenced}],
        "response_format": {"type": "json_object"},
    }
    assert orjson.loads(structured_reply(body, Reply()).text) == {"city": "xxxxxxxx"}
