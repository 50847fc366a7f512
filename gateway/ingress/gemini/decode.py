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

from gateway.ingress.errors import ClientError, invalid
from gateway.ingress.gemini.fields import GEMINI, array, number, obj, string
from gateway.ingress.gemini.schema import json_schema
from gateway.ingress.gemini.tools import tool_choice, tools_of
from gateway.ingress.memo_items import Items
from gateway.ingress.resumed import ResumedReads
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from gateway.transcript.seal import Sealer

SIGNATURE = "thought_signature"  # gateway.providers.gemini's key in Continuity.data
SKIP_SIGNATURE = "skip_thought_signature_validator"
PLACEHOLDERS = frozenset({SKIP_SIGNATURE, base64.b64encode(SKIP_SIGNATURE.encode()).decode()})
LEVELS = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
# request fields that need Google-side state or services the gateway does not route
UNSUPPORTED = {
    "cachedContent": "cached contents (`cachedContent`) live on Google's side: send the contents instead",
}
_UNSUPPORTED_PARTS = ("executableCode", "codeExecutionResult", "videoMetadata", "toolCall", "toolResponse")


class Decoded:
    __slots__ = ("ignored_tokens", "include_thoughts")

    def __init__(self) -> None:
        self.ignored_tokens = 0
        self.include_thoughts = True


def decode_request(
    body: Any, model: str, stream: bool, sealer: Sealer, out: Decoded, items: Items[Any] | None = None
) -> Request:
    """`items`: what the decode memo found of `contents` (within an exchange)."""
    if type(body) is not dict:
        raise invalid("request body must be a JSON object")
    body = obj(body, "")
    for name, message in UNSUPPORTED.items():
        if body.get(name) is not None:
            raise ClientError(400, f"{name}: {message}", param=name, code="unsupported_parameter")
    contents = array(body.get("contents"), "contents")
    if not contents:
        raise invalid("contents is not specified", "contents")
    messages = _Contents(sealer, out).decode(contents, items, body)
    system = _system(body.get("systemInstruction"))
    tools, hosted = tools_of(body.get("tools"))
    config = obj(body.get("generationConfig"), "generationConfig")
    fields: dict[str, Any] = {}
    _generation(config, fields, out)
    return Request(
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        hosted_tools=hosted,
        tool_choice=tool_choice(body.get("toolConfig"), bool(tools)),
        stream=stream,
        **fields,
    )


def _system(value: Any) -> tuple[Text, ...]:
    if value is None:
        return ()
    if type(value) is str:  # the SDKs take a plain string too
        return (Text(value),) if value else ()
    content = obj(value, "systemInstruction")
    texts = []
    for i, part in enumerate(array(content.get("parts"), "systemInstruction.parts")):
        part = obj(part, f"systemInstruction.parts[{i}]", required=True)
        if "text" not in part:
            raise invalid(
                "only text parts are allowed in a system instruction", f"systemInstruction.parts[{i}]"
            )
        text = string(part["text"], f"systemInstruction.parts[{i}].text")
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
        content = obj(content, path, required=True)
        role = content.get("role") or "user"
        parts = array(content.get("parts"), f"{path}.parts")
        if role == "model":
            self._turn_calls = []
            blocks = [
                self._model_part(obj(p, f"{path}.parts[{j}]", True), f"{path}.parts[{j}]", i, j)
                for j, p in enumerate(parts)
            ]
            messages.append(Message(Role.ASSISTANT, tuple(_merge_text(blocks))))
        elif role in ("user", "function"):
            results: list[Block] = []
            own: list[Block] = []
            for j, p in enumerate(parts):
                block = self._user_part(obj(p, f"{path}.parts[{j}]", True), f"{path}.parts[{j}]")
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
            call = obj(part["functionCall"], f"{path}.functionCall", True)
            name = string(call.get("name"), f"{path}.functionCall.name")
            args = obj(call.get("args"), f"{path}.functionCall.args", data=True)
            raw_id = call.get("id")
            call_id = _strip(name, string(raw_id, f"{path}.functionCall.id")) if raw_id else f"call_{i}_{j}"
            block = ToolCall(call_id, name, orjson.dumps(args).decode(), meta)
            self._turn_calls.append(block)
            self.known.add(call_id)
            return block
        if "functionResponse" in part:
            raise invalid("a model turn cannot hold a functionResponse", path)
        _refuse_other(part, path)
        text = string(part.get("text", ""), f"{path}.text")
        if part.get("thought") is True:
            return Reasoning(text, meta)
        return Text(text, meta)

    # -- user turns -------------------------------------------------------------------------------

    def _user_part(self, part: dict[str, Any], path: str) -> Block | None:
        if "functionResponse" in part:
            return self._response(obj(part["functionResponse"], f"{path}.functionResponse", True), path)
        if "functionCall" in part:
            raise invalid("a user turn cannot hold a functionCall", path)
        if "inlineData" in part:
            blob = obj(part["inlineData"], f"{path}.inlineData", True)
            mime = string(blob.get("mimeType"), f"{path}.inlineData.mimeType")
            data = string(blob.get("data"), f"{path}.inlineData.data")
            return _media(mime, f"data:{mime};base64,{data}")
        if "fileData" in part:
            file = obj(part["fileData"], f"{path}.fileData", True)
            uri = string(file.get("fileUri"), f"{path}.fileData.fileUri")
            mime = file.get("mimeType") or "application/octet-stream"
            return _media(string(mime, f"{path}.fileData.mimeType"), uri)
        _refuse_other(part, path)
        if part.get("thought") is True:
            return None  # a client's own thought summary in a user turn says nothing to a model
        text = string(part.get("text", ""), f"{path}.text")
        return Text(text) if text else None

    def _response(self, response: dict[str, Any], path: str) -> ToolResult:
        name = string(response.get("name"), f"{path}.functionResponse.name")
        raw_id = response.get("id")
        call_id = _strip(name, string(raw_id, f"{path}.functionResponse.id")) if raw_id else ""
        if call_id not in self.known:
            call_id = self._pair(name) or call_id or name
        self.answered.add(call_id)
        payload = response.get("response")
        content, is_error = _result_content(obj(payload, f"{path}.functionResponse.response", data=True))
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
        token = string(value, path)
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


def _generation(config: dict[str, Any], fields: dict[str, Any], out: Decoded) -> None:
    path = "generationConfig"
    count = number(config.get("candidateCount"), f"{path}.candidateCount", int)
    if count not in (None, 1):
        raise ClientError(
            400, f"{path}.candidateCount: only one candidate is supported", param=f"{path}.candidateCount"
        )
    fields["max_tokens"] = number(config.get("maxOutputTokens"), f"{path}.maxOutputTokens", int)
    fields["temperature"] = number(config.get("temperature"), f"{path}.temperature")
    fields["top_p"] = number(config.get("topP"), f"{path}.topP")
    fields["top_k"] = number(config.get("topK"), f"{path}.topK", int)
    stop = config.get("stopSequences")
    if stop is not None:
        fields["stop"] = tuple(
            string(s, f"{path}.stopSequences") for s in array(stop, f"{path}.stopSequences")
        )
    fields["response_format"] = _response_format(config, path)
    thinking = obj(config.get("thinkingConfig"), f"{path}.thinkingConfig")
    if thinking:
        tpath = f"{path}.thinkingConfig"
        if thinking.get("includeThoughts") is False or "includeThoughts" not in thinking:
            out.include_thoughts = False  # Google sends thought summaries only when asked
        budget = number(thinking.get("thinkingBudget"), f"{tpath}.thinkingBudget", int)
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
            effort = LEVELS.get(string(level, f"{tpath}.thinkingLevel").upper())
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
