"""The Anthropic Messages API's transcript rules - role alternation, tool_use/tool_result pairing,
thinking placement, and verification of thinking signatures and redacted_thinking data - with the
exact messages recorded in PROVIDERS.md. Messages marked "unverified" are the most plausible
wording where no recording exists. Field and block shapes are checked first (`anthropic_shapes`).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from gateway.simulators.anthropic_blocks import Invalid
from gateway.simulators.anthropic_shapes import check_shape
from gateway.simulators.base import Rejection, SimulatorState
from gateway.simulators.structured import objects_closed, recursive

THINKING_TYPES = frozenset(("thinking", "redacted_thinking"))
MISSING_RESULTS = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)
UNEXPECTED_RESULT = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {ids}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
LOOP_NEEDS_THINKING = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
    "thinking blocks from previous turns. To avoid this requirement, disable `thinking`."
)
THINKING_FIRST = (
    "messages.{i}.content.0: If an assistant message contains any thinking blocks, the first block "
    "must be thinking or redacted_thinking. Found {found}."
)
THINKING_WHEN_DISABLED = (
    "messages.{i}.content.{j}: When thinking is disabled, an `assistant` message in the final position "
    "cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request."
)
THINKING_LAST = "messages.{i}: The final block in an assistant message cannot be `thinking`."
BAD_SIGNATURE = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
BAD_REDACTED = "messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"  # unverified


def thinking_signature(state: SimulatorState, model: str, thinking: str) -> str:
    return state.sign(model, "thinking", thinking)


def thinking_signature_ok(state: SimulatorState, model: str, thinking: str, signature: str) -> bool:
    if isinstance(signature, str) and signature.startswith(OMITTED):
        nonce = signature[len(OMITTED) : len(OMITTED) + NONCE_LEN]
        return thinking == "" and state.verify(signature[len(OMITTED) + NONCE_LEN :], model, "omitted", nonce)
    return state.verify(signature, model, "thinking", thinking)


OMITTED = "omit"  # prefix of the signature of thinking shown with display "omitted"


def omitted_thinking_signature(state: SimulatorState, model: str, nonce: str) -> str:
    """Thinking returned without its text (display "omitted"): the signature stands for text the
    client never saw, so it is unique per block (a nonce) and valid only with empty thinking."""
    return OMITTED + nonce + state.sign(model, "omitted", nonce)


def redacted_data(state: SimulatorState, model: str, nonce: str) -> str:
    """Redacted thinking is opaque and self-contained: the nonce travels in front of its MAC."""
    return nonce + state.sign(model, "redacted", nonce)


NONCE_LEN = 32  # hex characters of the per-response nonce in redacted_thinking data


def redacted_data_ok(state: SimulatorState, model: str, data: Any) -> bool:
    if not isinstance(data, str) or len(data) <= NONCE_LEN:
        return False
    return state.verify(data[NONCE_LEN:], model, "redacted", data[:NONCE_LEN])


BAD_ENCRYPTED = "messages.{i}.content.{j}: Invalid `encrypted_content` in `web_search_result`"  # unverified
UNPAIRED_SERVER = (
    "messages.{i}.content.{j}: the result of server tool call {id} must follow its `server_tool_use` "
    "block in the same assistant message"
)  # unverified


def search_result_content(state: SimulatorState, url: str) -> str:
    """The encrypted page of a web search result: only this API can read it back."""
    return state.sign("web_search_result", url)


def validate(state: SimulatorState, body: Any, model: str) -> Rejection | None:
    return check(state, body, model)[0]


def check(state: SimulatorState, body: Any, model: str) -> tuple[Rejection | None, int]:
    """(rejection, number of continuity tokens verified). Pure: the caller counts the tokens
    only when it accepts the request."""
    try:
        return None, _check(state, body, model)
    except Invalid as exc:
        return exc.rejection, 0


COUNT_KEYS = frozenset(
    ("model", "messages", "system", "tools", "tool_choice", "thinking", "context_management", "mcp_servers")
)


def check_count(state: SimulatorState, body: Any, model: str) -> tuple[Rejection | None, int]:
    """A count_tokens body: the Messages fields it takes, checked by the same rules (a budget
    needs no max_tokens here)."""
    if isinstance(body, dict):
        for key in body:
            if key not in COUNT_KEYS:
                return Rejection(400, f"{key}: Extra inputs are not permitted"), 0
        thinking = body.get("thinking")
        budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
        body = {**body, "max_tokens": budget + 1 if isinstance(budget, int) else 1}
    return check(state, body, model)


def _check(state: SimulatorState, body: Any, model: str) -> int:
    thinking, messages, blocks = check_shape(body)
    _check_thinking_model(body, model)
    _check_output_format(body, model)
    _check_cache_breakpoints(body, blocks)
    _check_alternation(messages)
    _check_tool_pairing(blocks)
    _check_server_tools(blocks)
    _check_thinking_placement(messages, blocks, thinking)
    return _verify_tokens(state, model, blocks)


def _check_server_tools(blocks: list[list[dict]]) -> None:
    """A server tool's call and its result are one assistant turn: the result follows the call in
    the same message (web search docs, "Response": server_tool_use, then web_search_tool_result). A
    call without its result may end a paused turn (`pause_turn`), which the client sends back."""
    for i, message in enumerate(blocks):
        calls: set[str] = set()
        for j, block in enumerate(message):
            kind = block["type"]
            if kind == "server_tool_use":
                calls.add(block["id"])
            elif (
                kind.endswith("_tool_result") and kind != "tool_result" and block["tool_use_id"] not in calls
            ):
                raise Invalid(UNPAIRED_SERVER.format(i=i, j=j, id=block["tool_use_id"]))


# https://docs.claude.com/en/docs/build-with-claude/extended-thinking: extended thinking on Claude
# 3.7 and the 4 models and later; adaptive thinking on Opus/Sonnet 4.6 and later
THINKING_MODELS = re.compile(r"claude-(?:(?:opus|sonnet|haiku)-(?:4|[5-9])|3-7-sonnet)")
ADAPTIVE_MODELS = re.compile(r"claude-(?:opus|sonnet)-(?:4-[6-9]|[5-9])(?:\D|$)")


def _check_thinking_model(body: dict, model: str) -> None:
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "enabled" and not THINKING_MODELS.match(model):
        raise Invalid(f"thinking is not supported for this model ({model})")  # unverified wording
    if kind == "adaptive" and not ADAPTIVE_MODELS.match(model):
        raise Invalid(f"adaptive thinking is not supported on this model ({model})")  # unverified wording


# models with JSON outputs (output_config.format): Claude 4.5 and later
STRUCTURED_OUTPUT_MODELS = re.compile(r"claude-(?:opus|sonnet|haiku)-(?:4-[5-9]|[5-9])(?:\D|$)")
MAX_CACHE_BREAKPOINTS = 4


def output_schema(body: dict) -> dict | None:
    """The JSON schema of a request's `output_config.format`, if it has one."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    return fmt.get("schema") if isinstance(fmt, dict) else None


def _check_output_format(body: dict, model: str) -> None:
    config = body.get("output_config")
    if config is None:
        return
    if not isinstance(config, dict):
        raise Invalid("output_config: Input should be a valid dictionary or object to extract fields from")
    fmt = config.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        raise Invalid("output_config.format.type: Input should be 'json_schema'")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise Invalid("output_config.format.schema: Field required")
    if not STRUCTURED_OUTPUT_MODELS.match(model):
        raise Invalid(f"'{model}' does not support output_config.format.")  # unverified wording
    problem = objects_closed(schema, "output_config.format.schema")
    if problem:
        raise Invalid(problem)
    # Claude's constrained decoding takes no recursive schema (grammar-compiled; Effect's
    # Anthropic codec keeps recursion to non-strict tools for this reason). Unverified wording.
    if recursive(schema):
        raise Invalid("output_config.format.schema: Recursive schemas are not supported.")


def _check_cache_breakpoints(body: dict, blocks: list[list[dict]]) -> None:
    system = body.get("system")
    found = sum(isinstance(t, dict) and "cache_control" in t for t in body.get("tools") or ())
    if isinstance(system, list):
        found += sum(isinstance(b, dict) and "cache_control" in b for b in system)
    found += sum("cache_control" in b for message in blocks for b in message)
    if found > MAX_CACHE_BREAKPOINTS:
        raise Invalid(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
        )


def _check_alternation(messages: list[dict]) -> None:
    # unverified (historic wording): the API now merges same-role runs; the simulator stays strict
    if messages[0]["role"] != "user":
        raise Invalid('messages: first message must use the "user" role')
    for prev, cur in itertools.pairwise(messages):
        if prev["role"] == cur["role"]:
            raise Invalid(
                f'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{cur["role"]}" roles in a row'
            )


def _tool_use_ids(blocks: list[dict]) -> list[str]:
    return [b["id"] for b in blocks if b["type"] == "tool_use"]


def _leading_result_ids(blocks: list[dict]) -> set[str]:
    """Results count as "immediately after" only when they open the next user message."""
    ids: set[str] = set()
    for block in blocks:
        if block["type"] != "tool_result":
            break
        ids.add(block["tool_use_id"])
    return ids


def _check_tool_pairing(blocks: list[list[dict]]) -> None:
    seen_ids: set[str] = set()
    for i, message in enumerate(blocks):
        for j, block in enumerate(message):
            if block["type"] == "tool_use":
                if block["id"] in seen_ids:
                    raise Invalid(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                seen_ids.add(block["id"])
        calls = _tool_use_ids(message)
        if calls:
            answered = _leading_result_ids(blocks[i + 1]) if i + 1 < len(blocks) else set()
            missing = [c for c in calls if c not in answered]
            if missing:
                raise Invalid(MISSING_RESULTS.format(i=i, ids=", ".join(missing)))
        results = [(j, b["tool_use_id"]) for j, b in enumerate(message) if b["type"] == "tool_result"]
        if results:
            expected = set(_tool_use_ids(blocks[i - 1])) if i > 0 else set()
            unexpected = [(j, r) for j, r in results if r not in expected]
            if unexpected:
                ids = ", ".join(r for _, r in unexpected)
                raise Invalid(UNEXPECTED_RESULT.format(i=i, j=unexpected[0][0], ids=ids))
            answered_ids: set[str] = set()
            for j, result_id in results:
                if result_id in answered_ids:
                    raise Invalid(
                        f"messages.{i}.content.{j}: each tool_use must have a single result. "
                        f"Found multiple `tool_result` blocks with id: {result_id}"
                    )  # unverified
                answered_ids.add(result_id)


def _loop_opener(messages: list[dict], blocks: list[list[dict]]) -> int | None:
    """Index of the assistant message that opened the current tool loop, when the request ends
    inside one (its last user message carries tool results)."""
    last = len(messages) - 1
    if messages[last]["role"] != "user" or not any(b["type"] == "tool_result" for b in blocks[last]):
        return None
    opener = last - 1  # pairing guarantees an assistant message with the calls sits here
    while opener >= 2 and any(b["type"] == "tool_result" for b in blocks[opener - 1]):
        opener -= 2
    return opener


def _check_thinking_placement(messages: list[dict], blocks: list[list[dict]], thinking: bool) -> None:
    for i, message in enumerate(blocks):
        if messages[i]["role"] != "assistant" or not message:
            continue
        if any(b["type"] in THINKING_TYPES for b in message):
            if message[0]["type"] not in THINKING_TYPES:
                raise Invalid(THINKING_FIRST.format(i=i, found=message[0]["type"]))
            if message[-1]["type"] in THINKING_TYPES:
                raise Invalid(THINKING_LAST.format(i=i))
    last = len(messages) - 1
    if not thinking and messages[last]["role"] == "assistant":
        for j, block in enumerate(blocks[last]):
            if block["type"] in THINKING_TYPES:
                raise Invalid(THINKING_WHEN_DISABLED.format(i=last, j=j))
    if thinking:
        opener = _loop_opener(messages, blocks)
        if opener is not None and blocks[opener][0]["type"] not in THINKING_TYPES:
            raise Invalid(LOOP_NEEDS_THINKING.format(i=opener, found=blocks[opener][0]["type"]))


def _verify_tokens(state: SimulatorState, model: str, blocks: list[list[dict]]) -> int:
    """Every thinking block sent is verified (the API may strip old ones but never accepts a
    forged or edited one); returns how many real tokens were accepted."""
    verified = 0
    for i, message in enumerate(blocks):
        for j, block in enumerate(message):
            if block["type"] == "thinking":
                if not thinking_signature_ok(state, model, block["thinking"], block["signature"]):
                    raise Invalid(BAD_SIGNATURE.format(i=i, j=j))
                verified += 1
            elif block["type"] == "redacted_thinking":
                if not redacted_data_ok(state, model, block["data"]):
                    raise Invalid(BAD_REDACTED.format(i=i, j=j))
                verified += 1
            elif block["type"] == "web_search_tool_result" and isinstance(block["content"], list):
                for result in block["content"]:
                    if not isinstance(result, dict) or result.get("type") != "web_search_result":
                        continue
                    content = result.get("encrypted_content")
                    if not state.verify(content, "web_search_result", str(result.get("url"))):
                        raise Invalid(BAD_ENCRYPTED.format(i=i, j=j))
                    verified += 1
    return verified
