"""Decode a Gemini `generateContent` request (the model and the stream flag come from its URL)
into the canonical Request.

Tool-call ids: Gemini CLI renames every call id it receives to `<name>__<id>` and writes that id
on the call and its response; the prefix is taken off again here, so the id is the one the
gateway handed out (the store finds the call's continuity by it). A call without an id gets a
positional one, and a response without a usable id answers the first unanswered call of its name
in the latest model turn. Gemini CLI's `--resume` sends each earlier response twice: both decode
to results of the same call, and tool pairing keeps one (one effective result per call).

Thought signatures: the gateway's sealed token (another family's continuity) is unsealed; a raw
Gemini signature is echoed to Gemini targets only (issuer unknown); Gemini CLI's
`skip_thought_signature_validator` on calls that had none is no signature at all (the store
restores the real one where it kept it; Gemini targets get Google's placeholder from repair).

The contents are read left to right (a response pairs with the calls seen so far): an agent's
next turn re-sends the same contents in front, and the decode memo hands back the same witnesses
for them, so the reading resumes from its state after them and reads only the new contents, at
their own places (gateway/ingress/resumed.py).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.ingress.budget import KnownList
from gateway.ingress.errors import ClientError
from gateway.ingress.gemini.schema import json_schema
from gateway.ingress.memo_items import Items
from gateway.ingress.resumed import ResumedReads
from gateway.ingress.tool_lists import ToolLists
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    Continuity,
    Document,
    HostedTool,
    Image,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.seal import Sealer

GEMINI = "gemini"
SIGNATURE = "thought_signature"  # gateway.providers.gemini's key in Continuity.data
SKIP_SIGNATURE = "skip_thought_signature_validator"
PLACEHOLDERS = frozenset({SKIP_SIGNATURE, base64.b64encode(SKIP_SIGNATURE.encode()).decode()})
# Google's built-in tools: they run on Google's side, so only a Gemini target can serve them
BUILT_IN_TOOLS = (
    "googleSearch",
    "googleSearchRetrieval",
    "urlContext",
    "codeExecution",
    "fileSearch",
    "googleMaps",
    "computerUse",
    "enterpriseWebSearch",
)
MODES = {
    "AUTO": ToolChoiceMode.AUTO,
    "MODE_UNSPECIFIED": ToolChoiceMode.AUTO,
    "VALIDATED": ToolChoiceMode.AUTO,
    "NONE": ToolChoiceMode.NONE,
    "ANY": ToolChoiceMode.REQUIRED,
}
LEVELS = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
# request fields that need Google-side state or services the gateway does not route
UNSUPPORTED = {
    "cachedContent": "cached contents (`cachedContent`) live on Google's side: send the contents instead",
}
_UNSUPPORTED_PARTS = ("executableCode", "codeExecutionResult", "videoMetadata", "toolCall", "toolResponse")


def invalid(message: str, path: str | None = None) -> ClientError:
    return ClientError(400, f"{path}: {message}" if path else message, param=path)


class Decoded:
    __slots__ = ("ignored_tokens", "include_thoughts")

    def __init__(self) -> None:
        self.ignored_tokens = 0
        self.include_thoughts = True


def _dict(value: Any, path: str, required: bool = False, data: bool = False) -> dict[str, Any]:
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


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise invalid("must be an array", path)
    return value


def _str(value: Any, path: str) -> str:
    if type(value) is not str:
        raise invalid("must be a string", path)
    return value


def _number(value: Any, path: str, kind: type = float) -> Any:
    if value is None:
        return None
    if type(value) is bool or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise invalid("must be an integer" if kind is int else "must be a number", path)
    return kind(value)


def decode_request(
    body: Any, model: str, stream: bool, sealer: Sealer, out: Decoded, items: Items[Any] | None = None
) -> Request:
    """`items`: what the decode memo found of `contents` (within an exchange)."""
    if type(body) is not dict:
        raise invalid("request body must be a JSON object")
    body = _dict(body, "")
    for name, message in UNSUPPORTED.items():
        if body.get(name) is not None:
            raise ClientError(400, f"{name}: {message}", param=name, code="unsupported_parameter")
    contents = _list(body.get("contents"), "contents")
    if not contents:
        raise invalid("contents is not specified", "contents")
    messages = _Contents(sealer, out).decode(contents, items, body)
    system = _system(body.get("systemInstruction"))
    raw_tools = body.get("tools")
    kind = type(raw_tools)
    if kind is KnownList:  # found by its text (a body read in parts: gateway/ingress/tool_lists.py)
        tools, hosted = raw_tools.value
    else:
        tools, hosted = _TOOL_LISTS.decoded(raw_tools) if kind is list else _tools(raw_tools)
    config = _dict(body.get("generationConfig"), "generationConfig")
    fields: dict[str, Any] = {}
    _generation(config, fields, out)
    return Request(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        hosted_tools=hosted,
        tool_choice=_tool_choice(body.get("toolConfig"), bool(tools)),
        stream=stream,
        **fields,
    )


def _system(value: Any) -> tuple[Text, ...]:
    if value is None:
        return ()
    if type(value) is str:  # the SDKs take a plain string too
        return (Text(value),) if value else ()
    content = _dict(value, "systemInstruction")
    texts = []
    for i, part in enumerate(_list(content.get("parts"), "systemInstruction.parts")):
        part = _dict(part, f"systemInstruction.parts[{i}]", required=True)
        if "text" not in part:
            raise invalid(
                "only text parts are allowed in a system instruction", f"systemInstruction.parts[{i}]"
            )
        text = _str(part["text"], f"systemInstruction.parts[{i}].text")
        if text:
            texts.append(Text(text))
    return tuple(texts)


class _Contents:
    """The `contents` array as canonical messages, pairing responses with calls."""

    def __init__(self, sealer: Sealer, out: Decoded) -> None:
        self.sealer = sealer
        self.out = out
        self._turn_calls: list[ToolCall] = []  # of the latest model turn
        self.answered: set[str] = set()
        self.known: set[str] = set()  # every call id so far

    def decode(
        self, contents: list[Any], items: Items[Any] | None = None, body: Any = None
    ) -> tuple[Message, ...]:
        """`items`: what the decode memo found of the `contents` of `body` (within an exchange)."""
        reading = _READ.begin(contents, items, body, "contents", self.sealer)
        messages: list[Message] = []
        ignored = self.out.ignored_tokens
        held = reading.state
        if held is not None:
            messages = [*held[0]]
            self._turn_calls, self.answered, self.known = [*held[1]], set(held[2]), set(held[3])
            self.out.ignored_tokens += held[4]
        contents, record = reading.values, reading.record
        for i in range(reading.start, len(contents)):
            record(i)
            self._content(contents[i], i, messages)
        _READ.end(
            reading,
            self.sealer,
            lambda: (
                tuple(messages),
                tuple(self._turn_calls),
                # tuples, not frozensets: a tuple of strings leaves the collector's sight once a
                # collection has seen it, a set never does (gateway/ingress/resumed.py)
                tuple(self.answered),
                tuple(self.known),
                self.out.ignored_tokens - ignored,
            ),
        )
        return tuple(messages)

    def _content(self, content: Any, i: int, messages: list[Message]) -> None:
        path = f"contents[{i}]"
        content = _dict(content, path, required=True)
        role = content.get("role") or "user"
        parts = _list(content.get("parts"), f"{path}.parts")
        if role == "model":
            self._turn_calls = []
            blocks = [
                self._model_part(_dict(p, f"{path}.parts[{j}]", True), f"{path}.parts[{j}]", i, j)
                for j, p in enumerate(parts)
            ]
            messages.append(Message(Role.ASSISTANT, tuple(_merge_text(blocks))))
        elif role in ("user", "function"):
            results: list[Block] = []
            own: list[Block] = []
            for j, p in enumerate(parts):
                block = self._user_part(_dict(p, f"{path}.parts[{j}]", True), f"{path}.parts[{j}]")
                if block is not None:
                    (results if type(block) is ToolResult else own).append(block)
            if results:
                messages.append(Message(Role.TOOL, tuple(results)))
            if own:
                messages.append(Message(Role.USER, tuple(own)))
        else:
            raise invalid(f"Please use a valid role: user, model (got {role!r})", f"{path}.role")

    # -- model turns ------------------------------------------------------------------------------

    def _model_part(self, part: dict[str, Any], path: str, i: int, j: int) -> Block:
        meta = self._signature(part.get("thoughtSignature"), f"{path}.thoughtSignature")
        if "functionCall" in part:
            call = _dict(part["functionCall"], f"{path}.functionCall", True)
            name = _str(call.get("name"), f"{path}.functionCall.name")
            args = _dict(call.get("args"), f"{path}.functionCall.args", data=True)
            raw_id = call.get("id")
            call_id = _strip(name, _str(raw_id, f"{path}.functionCall.id")) if raw_id else f"call_{i}_{j}"
            block = ToolCall(call_id, name, orjson.dumps(args).decode(), meta)
            self._turn_calls.append(block)
            self.known.add(call_id)
            return block
        if "functionResponse" in part:
            raise invalid("a model turn cannot hold a functionResponse", path)
        _refuse_other(part, path)
        text = _str(part.get("text", ""), f"{path}.text")
        if part.get("thought") is True:
            return Reasoning(text, meta)
        return Text(text, meta)

    # -- user turns -------------------------------------------------------------------------------

    def _user_part(self, part: dict[str, Any], path: str) -> Block | None:
        if "functionResponse" in part:
            return self._response(_dict(part["functionResponse"], f"{path}.functionResponse", True), path)
        if "functionCall" in part:
            raise invalid("a user turn cannot hold a functionCall", path)
        if "inlineData" in part:
            blob = _dict(part["inlineData"], f"{path}.inlineData", True)
            mime = _str(blob.get("mimeType"), f"{path}.inlineData.mimeType")
            data = _str(blob.get("data"), f"{path}.inlineData.data")
            return _media(mime, f"data:{mime};base64,{data}")
        if "fileData" in part:
            file = _dict(part["fileData"], f"{path}.fileData", True)
            uri = _str(file.get("fileUri"), f"{path}.fileData.fileUri")
            mime = file.get("mimeType") or "application/octet-stream"
            return _media(_str(mime, f"{path}.fileData.mimeType"), uri)
        _refuse_other(part, path)
        if part.get("thought") is True:
            return None  # a client's own thought summary in a user turn says nothing to a model
        text = _str(part.get("text", ""), f"{path}.text")
        return Text(text) if text else None

    def _response(self, response: dict[str, Any], path: str) -> ToolResult:
        name = _str(response.get("name"), f"{path}.functionResponse.name")
        raw_id = response.get("id")
        call_id = _strip(name, _str(raw_id, f"{path}.functionResponse.id")) if raw_id else ""
        if call_id not in self.known:
            call_id = self._pair(name) or call_id or name
        self.answered.add(call_id)
        payload = response.get("response")
        content, is_error = _result_content(_dict(payload, f"{path}.functionResponse.response", data=True))
        return ToolResult(call_id, content, is_error)

    def _pair(self, name: str) -> str | None:
        """The call a response without a known id answers: the first unanswered one of its name
        in the latest model turn, else (a repeated response) the last one of its name."""
        same = [c for c in self._turn_calls if c.name == name]
        for call in same:
            if call.id not in self.answered:
                return call.id
        return same[-1].id if same else None

    def _signature(self, value: Any, path: str) -> Continuity | None:
        if value is None:
            return None
        token = _str(value, path)
        if not token or token in PLACEHOLDERS:
            return None
        sealed = _sealed(token)
        if sealed is not None:
            meta = self.sealer.unseal(sealed)
            if meta is None:
                self.out.ignored_tokens += 1
            return meta
        return Continuity("client", ANY_ISSUER, GEMINI, ANY_ISSUER, {SIGNATURE: token})


# the reading's state after a conversation's contents, per conversation (resumed: see above)
_READ = ResumedReads()


_SEALED_B64 = base64.b64encode(Sealer.PREFIX.encode()).decode()[:4]


def _sealed(token: str) -> str | None:
    """The gateway's sealed token inside a signature (base64 of its bytes, as the wire's bytes
    field needs), or None for a provider's own signature."""
    if not token.startswith(_SEALED_B64):
        return None
    try:
        raw = base64.b64decode(token, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return raw if raw.startswith(Sealer.PREFIX) else None


def _strip(name: str, call_id: str) -> str:
    prefix = name + "__"
    return call_id[len(prefix) :] if call_id.startswith(prefix) and len(call_id) > len(prefix) else call_id


def _refuse_other(part: dict[str, Any], path: str) -> None:
    for key in _UNSUPPORTED_PARTS:
        if key in part:
            raise ClientError(400, f"{path}.{key}: {key} parts are not supported", param=f"{path}.{key}")


def _media(mime: str, source: str) -> Block:
    if mime.startswith("image/"):
        return Image(source)
    return Document(source, media_type=mime)


def _merge_text(blocks: list[Block]) -> list[Block]:
    """Adjacent unsigned text parts as one block (streamed answers come back a part per chunk);
    a signed part stays on its own, as Gemini validates signatures per part."""
    out: list[Block] = []
    for block in blocks:
        prev = out[-1] if out else None
        if type(block) is Text and type(prev) is Text and block.meta is None and prev.meta is None:
            out[-1] = Text(prev.text + block.text)
        elif type(block) is Reasoning and type(prev) is Reasoning and prev.meta is None:
            out[-1] = Reasoning(prev.text + block.text, block.meta)
        else:
            out.append(block)
    return out


def _result_content(response: Mapping[str, Any]) -> tuple[str, bool]:
    """A function response as text: Gemini CLI writes `{"output": ...}` or `{"error": ...}`, the
    SDKs whatever object the app returns (given whole, as JSON)."""
    if set(response) == {"error"}:
        error = response["error"]
        return (error if type(error) is str else orjson.dumps(error).decode()), True
    for key in ("output", "content", "result"):
        if set(response) == {key} and type(response[key]) is str:
            return response[key], False
    return orjson.dumps(response).decode(), False


def _tools(value: Any) -> tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]:
    specs: list[ToolSpec] = []
    hosted: list[HostedTool] = []
    for t, tool in enumerate(_list(value, "tools")):
        path = f"tools[{t}]"
        tool = _dict(tool, path, True)
        for key, spec in tool.items():
            if key == "functionDeclarations":
                for d, declaration in enumerate(_list(spec, f"{path}.{key}")):
                    specs.append(
                        _declaration(_dict(declaration, f"{path}.{key}[{d}]", True), f"{path}.{key}[{d}]")
                    )
            elif key in BUILT_IN_TOOLS:
                hosted.append(HostedTool(GEMINI, key, {key: spec}, required=True))
            else:
                raise invalid(f"unknown tool {key!r}", f"{path}.{key}")
    return tuple(specs), tuple(hosted)


# the declarations' schemas are read and converted once per list (gateway/ingress/tool_lists.py)
_TOOL_LISTS = ToolLists(_tools)
# no typed reading of the contents (parsed by orjson), the tools found by their text
TYPED_TOOLS = TypedItems(None, 0, frozenset(), tools=_TOOL_LISTS)


def _declaration(declaration: dict[str, Any], path: str) -> ToolSpec:
    name = _str(declaration.get("name"), f"{path}.name")
    description = declaration.get("description") or ""
    if "parametersJsonSchema" in declaration:
        parameters = json_schema(declaration["parametersJsonSchema"], f"{path}.parametersJsonSchema")
    elif declaration.get("parameters") is not None:
        parameters = json_schema(declaration["parameters"], f"{path}.parameters")
    else:
        parameters = {"type": "object", "properties": {}}
    return ToolSpec(name, _str(description, f"{path}.description"), parameters)


def _tool_choice(value: Any, has_tools: bool) -> ToolChoice | None:
    config = _dict(
        _dict(value, "toolConfig").get("functionCallingConfig"), "toolConfig.functionCallingConfig"
    )
    if not config or not has_tools:
        return None
    path = "toolConfig.functionCallingConfig"
    mode = MODES.get(config.get("mode") or "AUTO")
    if mode is None:
        raise invalid(f"unknown mode {config.get('mode')!r}", f"{path}.mode")
    names = [_str(n, f"{path}.allowedFunctionNames") for n in _list(config.get("allowedFunctionNames"), path)]
    if mode is ToolChoiceMode.REQUIRED and len(names) == 1:
        return ToolChoice(ToolChoiceMode.TOOL, names[0])
    if names and mode is ToolChoiceMode.REQUIRED:
        raise ClientError(
            400,
            f"{path}.allowedFunctionNames: only one allowed function name can be honoured on every provider",
            param=f"{path}.allowedFunctionNames",
            code="unsupported_parameter",
        )
    return ToolChoice(mode)


def _generation(config: dict[str, Any], fields: dict[str, Any], out: Decoded) -> None:
    path = "generationConfig"
    count = _number(config.get("candidateCount"), f"{path}.candidateCount", int)
    if count not in (None, 1):
        raise ClientError(
            400, f"{path}.candidateCount: only one candidate is supported", param=f"{path}.candidateCount"
        )
    fields["max_tokens"] = _number(config.get("maxOutputTokens"), f"{path}.maxOutputTokens", int)
    fields["temperature"] = _number(config.get("temperature"), f"{path}.temperature")
    fields["top_p"] = _number(config.get("topP"), f"{path}.topP")
    fields["top_k"] = _number(config.get("topK"), f"{path}.topK", int)
    stop = config.get("stopSequences")
    if stop is not None:
        fields["stop"] = tuple(_str(s, f"{path}.stopSequences") for s in _list(stop, f"{path}.stopSequences"))
    fields["response_format"] = _response_format(config, path)
    thinking = _dict(config.get("thinkingConfig"), f"{path}.thinkingConfig")
    if thinking:
        tpath = f"{path}.thinkingConfig"
        if thinking.get("includeThoughts") is False or "includeThoughts" not in thinking:
            out.include_thoughts = False  # Google sends thought summaries only when asked
        budget = _number(thinking.get("thinkingBudget"), f"{tpath}.thinkingBudget", int)
        level = thinking.get("thinkingLevel")
        if budget == 0:
            fields["thinking"] = False
        elif budget is not None and budget > 0:
            fields["thinking"] = True
            fields["thinking_budget"] = budget
        elif budget == -1:  # dynamic: on, the model sizes it
            fields["thinking"] = True
        elif budget is not None:
            raise invalid("must be -1 (dynamic), 0 (off) or a positive budget", f"{tpath}.thinkingBudget")
        if level is not None:
            effort = LEVELS.get(_str(level, f"{tpath}.thinkingLevel").upper())
            if effort is None:
                raise invalid(f"unknown thinking level {level!r}", f"{tpath}.thinkingLevel")
            fields["reasoning_effort"] = effort
    else:
        out.include_thoughts = False


def _response_format(config: dict[str, Any], path: str) -> ResponseFormat | None:
    mime = config.get("responseMimeType")
    schema = config.get("responseJsonSchema", config.get("_responseJsonSchema"))
    if schema is not None:
        schema = json_schema(schema, f"{path}.responseJsonSchema")
    elif config.get("responseSchema") is not None:
        schema = json_schema(config["responseSchema"], f"{path}.responseSchema")
    if mime in (None, "text/plain"):
        if schema is not None:
            raise invalid(
                "a response schema needs responseMimeType application/json", f"{path}.responseMimeType"
            )
        return None
    if mime != "application/json":
        raise ClientError(
            400,
            f"{path}.responseMimeType: {mime!r} is not supported (text/plain, application/json)",
            param=f"{path}.responseMimeType",
        )
    if schema is None:
        return ResponseFormat("json_object")
    return ResponseFormat("json_schema", schema=schema)
