"""Google's OpenAPI-subset schemas (`parameters`, `responseSchema`: upper-case `type`, `nullable`)
as the JSON Schema the canonical transcript carries. `parametersJsonSchema` and
`responseJsonSchema` are JSON Schema, but Google takes its upper-case type names there too and
Gemini CLI sends them (`"type": "OBJECT"` in its router's `responseJsonSchema`): every schema
goes through the same normalisation, which leaves a plain JSON Schema as it is."""

from __future__ import annotations

from typing import Any

from gateway.ingress.errors import ClientError

_NESTED_ONE = ("items", "not", "additionalProperties")
_NESTED_MAP = ("properties", "$defs", "definitions", "patternProperties")
_NESTED_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def json_schema(node: Any, path: str) -> Any:
    if type(node) is bool and "." in path:  # `true` / `false`: a JSON Schema sub-schema
        return node
    if not isinstance(node, dict):
        raise ClientError(400, f"{path}: a schema must be an object", param=path)
    out: dict[str, Any] = {}
    nullable = node.get("nullable") is True
    for key, value in node.items():
        if key == "nullable":
            continue
        if key == "type" and isinstance(value, list):
            out["type"] = [v.lower() if isinstance(v, str) else v for v in value]
        elif key == "type" and isinstance(value, str):
            out["type"] = value.lower() if value.upper() != "TYPE_UNSPECIFIED" else None
            if out["type"] is None:
                del out["type"]
        elif key in _NESTED_MAP and isinstance(value, dict):
            out[key] = {name: json_schema(sub, f"{path}.{key}.{name}") for name, sub in value.items()}
        elif key in _NESTED_ONE and isinstance(value, dict):
            out[key] = json_schema(value, f"{path}.{key}")
        elif key in _NESTED_LIST and isinstance(value, list):
            out[key] = [json_schema(sub, f"{path}.{key}[{i}]") for i, sub in enumerate(value)]
        elif key == "propertyOrdering":
            continue  # Google's own ordering hint: no JSON Schema meaning
        else:
            out[key] = value
    if nullable:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out
