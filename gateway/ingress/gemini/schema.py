"""Google's OpenAPI-subset schemas (`parameters`, `responseSchema`: upper-case `type`, `nullable`)
as the JSON Schema the canonical transcript carries. `parametersJsonSchema` and
`responseJsonSchema` are JSON Schema already and pass as they are."""

from __future__ import annotations

from typing import Any

from gateway.ingress.errors import ClientError

_NESTED_ONE = ("items", "not")
_NESTED_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")


def json_schema(node: Any, path: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise ClientError(400, f"{path}: a schema must be an object", param=path)
    out: dict[str, Any] = {}
    nullable = node.get("nullable") is True
    for key, value in node.items():
        if key == "nullable":
            continue
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower() if value.upper() != "TYPE_UNSPECIFIED" else None
            if out["type"] is None:
                del out["type"]
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(sub, f"{path}.properties.{name}") for name, sub in value.items()}
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
