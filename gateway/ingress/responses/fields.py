"""Reading Responses request JSON by hand, with the JSON path of every problem in the 400.

The request is a tree of tagged unions (input items, content parts, tools) that clients extend
all the time: unknown fields are tolerated, unknown tags are refused by name.
"""

from __future__ import annotations

from typing import Any

from gateway.ingress.errors import ClientError, invalid


def path_of(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def wrong_type(path: str, expected: str, value: Any) -> ClientError:
    return invalid(f"expected {expected}, got {type_name(value)}", param=path, code="invalid_type")


def obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise wrong_type(path, "an object", value)
    return value


def array(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise wrong_type(path, "an array", value)
    return value


def text(node: dict[str, Any], key: str, path: str, *, required: bool = True, empty: bool = True) -> str:
    """A string field; "" when absent and not required. (Its path is built only for an error:
    this runs for every field of every item.)"""
    value = node.get(key)
    if isinstance(value, str) and (empty or value):
        return value
    where = path_of(path, key)
    if value is None:
        if required:
            raise invalid("is required", param=where, code="missing_required_parameter")
        return ""
    if not isinstance(value, str):
        raise wrong_type(where, "a string", value)
    raise invalid("must not be empty", param=where, code="invalid_value")


def optional_text(node: dict[str, Any], key: str, path: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(path_of(path, key), "a string", value)
    return value


def flag(node: dict[str, Any], key: str, path: str = "") -> bool | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise wrong_type(path_of(path, key), "a boolean", value)
    return value


def number(node: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(key, "a number", value)
    if not low <= value <= high:
        raise invalid(f"must be between {low:g} and {high:g}", param=key, code="invalid_value")
    return float(value)


def integer(node: dict[str, Any], key: str, low: int) -> int | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(key, "an integer", value)
    if value < low:
        raise invalid(f"must be at least {low}", param=key, code="invalid_value")
    return value


def choice(node: dict[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if value not in allowed:
        listed = ", ".join(repr(a) for a in allowed)
        raise invalid(
            f"must be one of {listed}, got {value!r}", param=path_of(path, key), code="invalid_value"
        )
    return value
