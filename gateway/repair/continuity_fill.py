"""Continuity a target requires where the transcript has none of its own (DESIGN.md 4.3).

- Gemini 3 (`thought_signature_placeholder` + `thought_signature_key`): the first function call
  of every model step in the current turn must carry a thought signature. A step the target did
  not produce has none, so it gets the placeholder Google documents for transferred traces.
- DeepSeek / Kimi thinking mode (`reasoning_content_on_tool_turns`): every assistant message with
  tool calls carries `reasoning_content`; without the target's own reasoning it gets an empty one.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Message, Reasoning, Role, ToolCall, replace
from gateway.transcript.target import Capabilities, Target


def current_turn_start(messages: tuple[Message, ...]) -> int:
    """Index after the last user message: the current turn, where Gemini validates signatures.
    (Tool results live in tool messages, so every user message is more than tool results.)"""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.USER:
            return i + 1
    return 0


def fill_thought_signatures(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    key, placeholder = caps.thought_signature_key, caps.thought_signature_placeholder
    if not key or not placeholder:
        return messages, []
    repairs: list[Repair] = []
    out = list(messages)
    for i in range(current_turn_start(messages), len(messages)):
        message = messages[i]
        if message.role is not Role.ASSISTANT:
            continue
        for n, block in enumerate(message.blocks):
            if type(block) is not ToolCall:
                continue
            meta = block.meta
            if not (target.owns(meta) and meta.data.get(key)):
                # the reasoning policy removed foreign meta, so what is left (a native id) is ours
                data = {**meta.data, key: placeholder} if target.owns(meta) else {key: placeholder}
                blocks = list(message.blocks)
                blocks[n] = replace(block, meta=target.continuity(data))
                out[i] = Message(Role.ASSISTANT, tuple(blocks))
                repairs.append(Repair("placeholder_thought_signature"))
            break  # only the first call of a step is signed
    return (tuple(out) if repairs else messages), repairs


def fill_reasoning_content(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    if not caps.reasoning_content_on_tool_turns:
        return messages, []
    repairs: list[Repair] = []
    out: list[Message] = []
    for message in messages:
        blocks = message.blocks
        if (
            message.role is Role.ASSISTANT
            and any(type(b) is ToolCall for b in blocks)
            and not any(type(b) is Reasoning and target.owns(b.meta) for b in blocks)
        ):
            filled: tuple[Block, ...] = (Reasoning("", target.continuity({})), *blocks)
            out.append(Message(Role.ASSISTANT, filled))
            repairs.append(Repair("reasoning_content_filled"))
        else:
            out.append(message)
    return (tuple(out) if repairs else messages), repairs
