"""The v1beta GenerateContentRequest as the Gemini API's JSON parser sees it.

The API maps JSON onto protobuf messages: unknown field names, lists given to singular fields and
badly typed scalars are refused before any semantic check, in its own wording (paths use the proto
field names in snake_case). Both JSON spellings (camelCase and snake_case) of a field are accepted,
as the real parser does; `parse` returns the body normalized to camelCase.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson

# Field kinds: a message name, "[kind]" repeated, "{kind}" a map, "enum:Name", or a scalar:
# string | bool | int | number | bytes | struct (a JSON object) | value (any JSON).
FIELDS: dict[str, dict[str, str]] = {
    "GenerateContentRequest": {
        "model": "string",
        "contents": "[Content]",
        "systemInstruction": "Content",
        "tools": "[Tool]",
        "toolConfig": "ToolConfig",
        "safetySettings": "[SafetySetting]",
        "generationConfig": "GenerationConfig",
        "cachedContent": "string",
    },
    "Content": {"role": "string", "parts": "[Part]"},
    "Part": {
        "text": "string",
        "inlineData": "Blob",
        "functionCall": "FunctionCall",
        "functionResponse": "FunctionResponse",
        "fileData": "FileData",
        "executableCode": "struct",
        "codeExecutionResult": "struct",
        "thought": "bool",
        "thoughtSignature": "bytes",
        "videoMetadata": "struct",
        "mediaResolution": "value",
        "partMetadata": "struct",
    },
    "Blob": {"mimeType": "string", "data": "bytes"},
    "FileData": {"mimeType": "string", "fileUri": "string"},
    "FunctionCall": {"id": "string", "name": "string", "args": "struct"},
    "FunctionResponse": {
        "id": "string",
        "name": "string",
        "response": "struct",
        "parts": "[struct]",
        "willContinue": "bool",
        "scheduling": "enum:Scheduling",
    },
    "Tool": {
        "functionDeclarations": "[FunctionDeclaration]",
        "googleSearchRetrieval": "struct",
        "codeExecution": "struct",
        "googleSearch": "struct",
        "urlContext": "struct",
        "computerUse": "struct",
        "fileSearch": "struct",
        "googleMaps": "struct",
    },
    "FunctionDeclaration": {
        "name": "string",
        "description": "string",
        "behavior": "enum:Behavior",
        "parameters": "Schema",
        "parametersJsonSchema": "value",
        "response": "Schema",
        "responseJsonSchema": "value",
    },
    "Schema": {
        "type": "enum:Type",
        "format": "string",
        "title": "string",
        "description": "string",
        "nullable": "bool",
        "enum": "[string]",
        "maxItems": "int",
        "minItems": "int",
        "properties": "{Schema}",
        "required": "[string]",
        "minProperties": "int",
        "maxProperties": "int",
        "minLength": "int",
        "maxLength": "int",
        "pattern": "string",
        "example": "value",
        "anyOf": "[Schema]",
        "propertyOrdering": "[string]",
        "default": "value",
        "items": "Schema",
        "minimum": "number",
        "maximum": "number",
    },
    "ToolConfig": {"functionCallingConfig": "FunctionCallingConfig", "retrievalConfig": "struct"},
    "FunctionCallingConfig": {"mode": "enum:Mode", "allowedFunctionNames": "[string]"},
    "SafetySetting": {"category": "string", "threshold": "string"},
    "GenerationConfig": {
        "stopSequences": "[string]",
        "responseMimeType": "string",
        "responseSchema": "Schema",
        "responseJsonSchema": "value",
        "responseModalities": "[string]",
        "candidateCount": "int",
        "maxOutputTokens": "int",
        "temperature": "number",
        "topP": "number",
        "topK": "int",
        "seed": "int",
        "presencePenalty": "number",
        "frequencyPenalty": "number",
        "responseLogprobs": "bool",
        "logprobs": "int",
        "enableEnhancedCivicAnswers": "bool",
        "speechConfig": "struct",
        "thinkingConfig": "ThinkingConfig",
        "imageConfig": "struct",
        "mediaResolution": "value",
    },
    "ThinkingConfig": {
        "includeThoughts": "bool",
        "thinkingBudget": "int",
        "thinkingLevel": "enum:ThinkingLevel",
    },
}
ENUMS: dict[str, frozenset[str]] = {
    "Type": frozenset(
        ["TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"]
    ),
    "Mode": frozenset(["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"]),
    "ThinkingLevel": frozenset(["THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH"]),
    "Behavior": frozenset(["UNSPECIFIED", "BLOCKING", "NON_BLOCKING"]),
    "Scheduling": frozenset(["SCHEDULING_UNSPECIFIED", "SILENT", "WHEN_IDLE", "INTERRUPT"]),
}
# Part.data is a proto oneof: exactly one of these per part.
PART_DATA = frozenset(
    {
        "text",
        "inlineData",
        "functionCall",
        "functionResponse",
        "fileData",
        "executableCode",
        "codeExecutionResult",
    }
)
_SCALAR_TYPES = {
    "string": "TYPE_STRING",
    "bool": "TYPE_BOOL",
    "int": "TYPE_INT32",
    "number": "TYPE_DOUBLE",
    "bytes": "TYPE_BYTES",
    "struct": "type.googleapis.com/google.protobuf.Struct",
}
_TYPE_URL = "type.googleapis.com/google.ai.generativelanguage.v1beta."


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


ALIASES = {message: {snake(name): name for name in fields} for message, fields in FIELDS.items()}


def decode_bytes(value: str) -> bytes | None:
    """Proto JSON bytes: standard or URL-safe base64, padding optional."""
    try:
        return base64.urlsafe_b64decode(value.replace("+", "-").replace("/", "_") + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return None


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _at(path: str) -> str:
    return f" at '{path}'" if path else ""


def _shown(value: Any) -> str:
    return orjson.dumps(value).decode()


class _Parser:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def message(self, obj: dict, message: str, path: str) -> dict:
        fields, aliases = FIELDS[message], ALIASES[message]
        out: dict[str, Any] = {}
        data_field: str | None = None
        for key, value in obj.items():
            name = key if key in fields else aliases.get(key)
            if name is None:
                self.errors.append(
                    f'Invalid JSON payload received. Unknown name "{key}"{_at(path)}: Cannot find field.'
                )
                continue
            if message == "Part" and name in PART_DATA:
                if data_field is not None:
                    self.errors.append(
                        f"Invalid value at '{_child(path, 'data')}' (oneof), oneof field 'data' is "
                        "already set. "
                        f"Cannot set '{key}'"
                    )
                    continue
                data_field = name
            parsed = self.value(value, fields[name], _child(path, snake(name)), key, path)
            if parsed is not None:
                out[name] = parsed
        return out

    def value(self, value: Any, kind: str, path: str, key: str, parent: str) -> Any:
        if value is None:
            return None  # JSON null leaves a proto field unset
        if kind.startswith("["):
            if not isinstance(value, list):
                return self._invalid(path, kind[1:-1], value)
            inner = kind[1:-1]
            items = (self.value(v, inner, f"{path}[{i}]", key, parent) for i, v in enumerate(value))
            return [item for item in items if item is not None]
        if isinstance(value, list):
            self.errors.append(
                f'Invalid JSON payload received. Unknown name "{key}"{_at(parent)}: '
                "Proto field is not repeating, cannot start list."
            )
            return None
        if kind.startswith("{"):
            if not isinstance(value, dict):
                return self._invalid(path, kind[1:-1], value)
            inner = kind[1:-1]
            return {
                k: self.value(v, inner, f"{path}[{i}].value", k, path)
                for i, (k, v) in enumerate(value.items())
            }
        if kind in FIELDS:
            return (
                self.message(value, kind, path)
                if isinstance(value, dict)
                else self._invalid(path, kind, value)
            )
        if kind.startswith("enum:"):
            name = kind[5:]
            if isinstance(value, str) and value.upper() in ENUMS[name]:
                return value.upper()
            return self._invalid(path, name, value)
        if self._scalar_ok(value, kind):
            return value
        if kind == "bytes" and isinstance(value, str):
            self.errors.append(
                f"Invalid value at '{path}' (TYPE_BYTES), Base64 decoding failed for {_shown(value)}"
            )
            return None
        self.errors.append(f"Invalid value at '{path}' ({_SCALAR_TYPES[kind]}), {_shown(value)}")
        return None

    @staticmethod
    def _scalar_ok(value: Any, kind: str) -> bool:
        if kind == "value":
            return True
        if kind == "string":
            return isinstance(value, str)
        if kind == "bool":
            return isinstance(value, bool)
        if kind == "int":
            return (isinstance(value, int) and not isinstance(value, bool)) or (
                isinstance(value, str) and value.lstrip("-").isdigit()
            )
        if kind == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind == "bytes":
            return isinstance(value, str) and decode_bytes(value) is not None
        if kind == "struct":
            return isinstance(value, dict)
        raise ValueError(f"unknown field kind {kind!r}")

    def _invalid(self, path: str, type_name: str, value: Any) -> None:
        if type_name in _SCALAR_TYPES:
            type_name = _SCALAR_TYPES[type_name]
        elif type_name in FIELDS or type_name in ENUMS:
            type_name = _TYPE_URL + type_name
        self.errors.append(f"Invalid value at '{path}' ({type_name}), {_shown(value)}")


def parse(body: Any) -> tuple[dict, list[str]]:
    """The body normalized to camelCase field names, and the parse errors the API would report."""
    parser = _Parser()
    if not isinstance(body, dict):
        return {}, [f"Invalid JSON payload received. Expected an object, got {_shown(body)}."]
    return parser.message(body, "GenerateContentRequest", ""), parser.errors
