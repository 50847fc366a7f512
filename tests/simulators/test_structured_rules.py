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


# a tree: children optional, so it ends; and a chain whose `next` is required, so nothing ends it
TREE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["name"],
    "additionalProperties": False,
}
ENDLESS = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"next": {"$ref": "#/$defs/Node"}},
            "required": ["next"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/Node",
}


def test_a_recursive_schema_that_ends_gets_a_finite_valid_answer():
    import jsonschema

    value = answer(TREE, Reply())
    jsonschema.validate(value, TREE)
    # the root itself is entered once more; at its first repeat only what is required
    assert value["children"][0]["children"] == [{"name": "xxxxxxxx"}]


def schema_requests(schema: dict) -> dict[str, tuple[dict, str]]:
    """The same JSON-schema request in each family's terms (kind -> (body, model))."""
    fmt = {"type": "json_schema", "json_schema": {"name": "W", "schema": schema}}
    return {
        "openai_chat": (chat(fmt), "gpt-4.1"),
        "mistral": (chat(fmt), "mistral-large-latest"),
        "kimi": (chat(fmt), "kimi-k2.5"),
        "openai_responses": (
            {
                "store": False,
                "input": [{"role": "user", "content": "x"}],
                "text": {"format": {"type": "json_schema", "name": "W", "schema": schema}},
            },
            "gpt-5.1",
        ),
        "gemini": (
            {
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema},
            },
            "gemini-2.5-flash",
        ),
        "anthropic": (
            anthropic_body(output_config={"format": {"type": "json_schema", "schema": schema}}),
            "claude-sonnet-4-5",
        ),
    }


def test_a_schema_no_finite_answer_satisfies_is_a_400_on_every_family_not_a_simulator_error():
    for kind, (body, model) in schema_requests(ENDLESS).items():
        found = VALIDATORS[kind](SimulatorState(kind), {"model": model, **body}, model)
        assert found is not None and found.status == 400, kind
    with pytest.raises(StructuredAnswerError):
        answer(ENDLESS, Reply())


def test_recursion_itself_is_refused_only_where_the_api_refuses_it():
    for kind, (body, model) in schema_requests(TREE).items():
        found = rejection(kind, body, model)
        if kind == "anthropic":
            assert found == "output_config.format.schema: Recursive schemas are not supported."
        else:
            assert found is None, (kind, found)


def test_a_forcing_tool_choice_is_a_call_of_that_tool_in_every_family():
    from gateway.simulators import gemini, responses_render
    from gateway.simulators.chat_family import forced_tool

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    chat_tools = [
        {"type": "function", "function": {"name": name, "parameters": schema}} for name in ("a", "answer")
    ]
    assert forced_tool({"tools": chat_tools, "tool_choice": "required"})[0] == "answer"
    assert forced_tool({"tools": chat_tools, "tool_choice": "any"})[0] == "answer"  # Mistral
    named = {"type": "function", "function": {"name": "a"}}
    assert forced_tool({"tools": chat_tools, "tool_choice": named})[0] == "a"
    assert forced_tool({"tools": chat_tools, "tool_choice": "auto"}) is None
    reply = structured_reply(
        {"tools": chat_tools, "tool_choice": "required", "messages": USER}, Reply(text="hi")
    )
    assert reply.text == "" and [c.name for c in reply.tool_calls] == ["answer"]

    responses_tools = [{"type": "function", "name": "a", "parameters": schema}]
    body = {"tools": responses_tools, "tool_choice": {"type": "function", "name": "a"}}
    reply = responses_render._structured(body, Reply(text="hi"))
    assert reply.tool_calls[0].name == "a" and reply.tool_calls[0].arguments == {"city": "xxxxxxxx"}

    declarations = [
        {
            "name": "a",
            "parameters": {"type": "OBJECT", "properties": {"n": {"type": "NUMBER"}}, "required": ["n"]},
        },
        {"name": "b"},
    ]
    req = {
        "tools": [{"functionDeclarations": declarations}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a"]}},
    }
    name, forced_schema = gemini.forced_tool(req)
    assert name == "a" and answer(forced_schema, Reply()) == {"n": 1.5}
    req["toolConfig"]["functionCallingConfig"]["mode"] = "AUTO"
    assert gemini.forced_tool(req) is None
