"""Structured output in the simulators: what the simulated model answers for a JSON-schema (or
JSON-mode) request, checked against the schema as constrained decoding guarantees it.

The answer is the scripted `Reply.data` when a test gives one, else a value synthesized from the
schema. Either way it is validated with `jsonschema` before it leaves the simulator: a simulator
never answers a schema request with JSON the schema refuses (a test scripting such data fails
loudly instead of passing on an impossible answer).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from gateway.simulators.base import Reply

ANY_OBJECT: dict[str, Any] = {"type": "object"}

_FORMATS = {
    "date-time": "2026-01-05T10:31:07Z",
    "date": "2026-01-05",
    "time": "10:31:07Z",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "uuid": "6f1c0a9b-e2d4-4e71-8a3f-1c2d3e4f5a6b",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
    "duration": "P1D",
}
_FENCED = re.compile(r"```json\s*\n(.*?)\n```", re.S)


class StructuredAnswerError(ValueError):
    """The simulator was about to answer with JSON its own schema refuses (a test bug)."""


def instance(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """A value valid for `schema` (the subset of JSON Schema that structured outputs use)."""
    root = schema if root is None else root
    if schema is True or not isinstance(schema, dict):
        return {}
    if depth > 32:
        raise StructuredAnswerError("schema nests too deep to synthesize an answer")
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        return instance(node, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance(schema[key][0], root, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = instance(part, root, depth + 1)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: instance(sub, root, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        count = max(1, schema.get("minItems") or 0)
        return [instance(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind == "string":
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        return "x" * max(schema.get("minLength") or 0, min(8, schema.get("maxLength") or 8))
    if kind == "integer":
        return int(schema.get("minimum", 0)) if schema.get("minimum", 0) > 0 else 1
    if kind == "number":
        return float(schema.get("minimum", 0)) if schema.get("minimum", 0) > 0 else 1.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return {}


def answer(schema: Any, reply: Reply) -> Any:
    """The value the model answers for `schema`, validated."""
    # a dev / simulator dependency: the demo without dev extras never asks for structured output
    import jsonschema

    value = reply.data if reply.data is not None else instance(schema)
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        raise StructuredAnswerError(f"the answer does not fit the requested schema: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise StructuredAnswerError(f"the requested schema is not a JSON schema: {exc.message}") from None
    return value


def answer_text(schema: Any, reply: Reply) -> str:
    return orjson.dumps(answer(schema, reply)).decode()


def schema_in_instructions(texts: list[str]) -> Any:
    """A JSON-mode model follows the schema its instructions spell out: the last ```json fenced
    object in them that is a schema, else any JSON object."""
    for text in reversed(texts):
        for block in reversed(_FENCED.findall(text)):
            try:
                schema = orjson.loads(block)
            except orjson.JSONDecodeError:
                continue
            if isinstance(schema, dict) and ("type" in schema or "properties" in schema):
                return schema
    return ANY_OBJECT


def mentions_json(texts: list[str]) -> bool:
    return any("json" in text.lower() for text in texts)


def strict_schema_problem(schema: Any, path: tuple[str, ...] = ()) -> str | None:
    """OpenAI's strict-mode rules: every object says additionalProperties false and requires
    every property. Returns the API's wording of the first breach (context = the path)."""
    if not isinstance(schema, dict):
        return None
    context = "(" + ", ".join(f"'{p}'" for p in path) + (",)" if len(path) == 1 else ")")
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"In context={context}, 'additionalProperties' is required to be supplied and to be false."
        properties = list((schema.get("properties") or {}).keys())
        missing = [p for p in properties if p not in (schema.get("required") or [])]
        if missing:
            return (
                f"In context={context}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
        for name, sub in (schema.get("properties") or {}).items():
            found = strict_schema_problem(sub, (*path, "properties", name))
            if found:
                return found
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            found = strict_schema_problem(sub, (*path, key, name))
            if found:
                return found
    for key in ("anyOf", "allOf"):
        for n, sub in enumerate(schema.get(key) or ()):
            found = strict_schema_problem(sub, (*path, key, str(n)))
            if found:
                return found
    if isinstance(schema.get("items"), dict):
        return strict_schema_problem(schema["items"], (*path, "items"))
    return None


def objects_closed(schema: Any, where: str) -> str | None:
    """Anthropic's rule: every object schema says additionalProperties false. The API's wording
    of the first breach, prefixed with `where`."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object":
        extra = schema.get("additionalProperties")
        if extra is True:
            return (
                f"{where}: For 'object' type, 'additionalProperties: true' is not supported. "
                "Please set 'additionalProperties' to false"
            )
        if extra is not False:
            return f"{where}: For 'object' type, 'additionalProperties' must be explicitly set to false"
    for key in ("properties", "$defs", "definitions"):
        for sub in (schema.get(key) or {}).values():
            if found := objects_closed(sub, where):
                return found
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in schema.get(key) or ():
            if found := objects_closed(sub, where):
                return found
    return objects_closed(schema.get("items"), where)
