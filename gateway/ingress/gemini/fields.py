"""Reading Gemini request JSON by hand (gateway/ingress/gemini/decode.py, tools.py): each check
refuses with the JSON path of the problem in the 400."""

from __future__ import annotations

from typing import Any

from gateway.ingress.errors import invalid

GEMINI = "gemini"  # the family whose continuity and built-in tools a Gemini request carries


def obj(value: Any, path: str, required: bool = False, data: bool = False) -> dict[str, Any]:
    """An object of the request's structure, its field names in lowerCamelCase: Google's parser
    takes the proto's snake_case names too (`system_instruction`, `function_call`). `data`: an
    object of the client's own (call arguments, a function's response), taken as it is."""
    if value is None and not required:
        return {}
    if type(value) is not dict:
        raise invalid("must be an object", path)
    if data or not any("_" in key for key in value):
        return value
    return {_camel(key): item for key, item in value.items()}


def _camel(name: str) -> str:
    if "_" not in name or name.startswith("_"):
        return name
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def array(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise invalid("must be an array", path)
    return value


def string(value: Any, path: str) -> str:
    if type(value) is not str:
        raise invalid("must be a string", path)
    return value


def number(value: Any, path: str, kind: type = float) -> Any:
    if value is None:
        return None
    if type(value) is bool or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise invalid("must be an integer" if kind is int else "must be a number", path)
    return kind(value)
