"""JSON schemas in the subset Anthropic's structured outputs (`output_config.format`) accept.

The API refuses an object schema without `additionalProperties: false` ("For 'object' type,
'additionalProperties' must be explicitly set to false") and constraints it cannot enforce
(numeric and string bounds, array sizes beyond minItems 0/1). As Anthropic's own SDKs do before
sending, unsupported constraints move into the description, where the model still reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.providers.base import EncodeError

STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_KEPT = frozenset({"type", "description", "title", "enum", "const", "default"})


def anthropic_output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    if type(schema) is not dict:
        raise EncodeError("response_format schema must be an object")
    return _node(schema)


def _node(node: Any) -> Any:
    if type(node) is not dict:
        return node  # `true`/`false` schemas and enum values pass as they are
    rest = dict(node)
    rest.pop("$schema", None)  # the dialect marker says nothing the API needs
    out: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        defs = rest.pop(key, None)
        if type(defs) is dict:
            out[key] = {name: _node(sub) for name, sub in defs.items()}
    ref = rest.pop("$ref", None)
    if ref is not None:
        out["$ref"] = ref
        return out
    for key in ("anyOf", "oneOf", "allOf"):
        variants = rest.pop(key, None)
        if type(variants) is list:
            out["anyOf" if key == "oneOf" else key] = [_node(v) for v in variants]
    for key in _KEPT:
        if key in rest:
            out[key] = rest.pop(key)
    kind = out.get("type")
    kinds = kind if type(kind) is list else [kind]
    if "object" in kinds:
        out["properties"] = {name: _node(sub) for name, sub in (rest.pop("properties", None) or {}).items()}
        if "required" in rest:
            out["required"] = rest.pop("required")
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
    if "array" in kinds:
        if "items" in rest:
            out["items"] = _node(rest.pop("items"))
        if rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")
    if "string" in kinds and rest.get("format") in STRING_FORMATS:
        out["format"] = rest.pop("format")
    if rest:  # what the API cannot enforce, the model can still read
        extra = "{" + ", ".join(f"{k}: {v}" for k, v in rest.items()) + "}"
        described = out.get("description")
        out["description"] = f"{described}\n\n{extra}" if described else extra
    return out
