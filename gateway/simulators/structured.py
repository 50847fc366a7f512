"""Structured output in the simulators: what the simulated model answers for a JSON-schema (or
JSON-mode) request, checked against the schema as constrained decoding guarantees it.

The answer is the scripted `Reply.data` when a test gives one, else a value synthesized from the
schema. Either way it is validated with `jsonschema` before it leaves the simulator: a simulator
never answers a schema request with JSON the schema refuses (a test scripting such data fails
loudly instead of passing on an impossible answer).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import jsonschema
import orjson

from gateway.simulators.base import Reply, ToolCallSpec

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


class _NoFiniteInstance(Exception):
    pass


def _resolve(ref: str, root: Any) -> Any:
    """A local JSON pointer (`#` is the root itself)."""
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else ():
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _primitive(schema: dict, kind: Any) -> Any:
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


def instance(schema: Any, root: Any = None, refs: tuple[str, ...] = ()) -> Any:
    """A value valid for `schema` (the subset of JSON Schema that structured outputs use). A
    recursive `$ref` met again on its own path is ended with the smallest value that schema
    allows, as a constrained decoder must."""
    root = schema if root is None else root
    if schema is True or not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        if ref in refs:
            return _minimal(_resolve(ref, root), root, refs)
        return instance(_resolve(ref, root), root, (*refs, ref))
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return instance(schema[key][0], root, refs)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = instance(part, root, refs)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: instance(sub, root, refs) for name, sub in properties.items()}
    if kind == "array":
        count = max(1, schema.get("minItems") or 0)
        return [instance(schema.get("items", {}), root, refs) for _ in range(count)]
    return _primitive(schema, kind)


def _minimal(schema: Any, root: Any, refs: tuple[str, ...]) -> Any:
    """The smallest value `schema` allows without entering any of `refs` again: only required
    properties, no optional array items, the first union branch that ends."""
    if schema is True or not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        if ref in refs:
            raise _NoFiniteInstance(ref)
        return _minimal(_resolve(ref, root), root, (*refs, ref))
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            for branch in schema[key]:
                try:
                    return _minimal(branch, root, refs)
                except _NoFiniteInstance:
                    continue
            raise _NoFiniteInstance(key)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = _minimal(part, root, refs)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        if "null" in kind:
            return None
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        required = schema.get("required") or ()
        return {name: _minimal(sub, root, refs) for name, sub in properties.items() if name in required}
    if kind == "array":
        count = schema.get("minItems") or 0
        return [_minimal(schema.get("items", {}), root, refs) for _ in range(count)]
    return _primitive(schema, kind)


def recursive(schema: Any) -> bool:
    """Whether a `$ref` of `schema` leads back to itself."""

    def walk(node: Any, refs: tuple[str, ...]) -> bool:
        if isinstance(node, list):
            return any(walk(item, refs) for item in node)
        if not isinstance(node, dict):
            return False
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            if ref in refs:
                return True
            try:
                return walk(_resolve(ref, schema), (*refs, ref))
            except (KeyError, TypeError, IndexError):
                return False
        return any(walk(value, refs) for key, value in node.items() if key not in ("$defs", "definitions"))

    return walk(schema, ())


def unbounded_problem(schema: Any) -> str | None:
    """A schema no finite JSON value satisfies (a required property that recurses without end):
    no model can answer it, so every API refuses it. The wording is the simulators' own."""
    try:
        _minimal(schema, schema, ())
    except _NoFiniteInstance as exc:
        return f"The schema has no finite instance: '{exc.args[0]}' recurses through required properties."
    except (KeyError, TypeError, IndexError):
        return "The schema has a $ref that does not resolve."
    return None


def answer(schema: Any, reply: Reply) -> Any:
    """The value the model answers for `schema`, validated."""
    try:
        value = reply.data if reply.data is not None else instance(schema)
    except _NoFiniteInstance:
        raise StructuredAnswerError("the requested schema has no finite instance") from None
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        raise StructuredAnswerError(f"the answer does not fit the requested schema: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise StructuredAnswerError(f"the requested schema is not a JSON schema: {exc.message}") from None
    return value


def answer_text(schema: Any, reply: Reply) -> str:
    return orjson.dumps(answer(schema, reply)).decode()


def forced_call(reply: Reply, forced: tuple[str, Any] | None) -> Reply:
    """A model under a forcing tool choice calls a tool whatever the script says: the forced
    (name, argument schema), with arguments valid for it. A scripted call, or a refusal, stands."""
    if forced is None or reply.tool_calls or reply.refusal is not None:
        return reply
    name, schema = forced
    call = ToolCallSpec(name, answer(schema or ANY_OBJECT, reply))
    return replace(reply, text="", tool_calls=[call])


def pick_forced(tools: list[tuple[str, Any]], name: str | None) -> tuple[str, Any] | None:
    """The tool a forcing choice makes the model call: the named one, else (any / required) the
    last declared, where clients put their answer tool (pydantic-ai's ToolOutput, Vercel's
    Output.object)."""
    if not tools:
        return None
    if name is None:
        return tools[-1]
    return next((tool for tool in tools if tool[0] == name), None)


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
