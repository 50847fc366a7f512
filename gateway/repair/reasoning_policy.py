"""Reasoning goes to a target only with that target's own continuity meta (DESIGN.md 4.3).

Foreign reasoning is dropped (policy `drop`, the default) or rendered as plain text (`as_text`);
continuity meta on text and tool calls that the target does not own is removed, because it would
be rejected (or, worse, silently misread) by a provider that did not issue it.
"""

from __future__ import annotations

from dataclasses import replace

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Image, Message, Reasoning, Role, Text, ToolCall, ToolResult
from gateway.transcript.target import Capabilities, Target


def apply_reasoning_policy(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    repairs: list[Repair] = []
    out: list[Message] = []
    changed_any = False
    for message in messages:
        if message.role is not Role.ASSISTANT:
            out.append(message)
            continue
        blocks: list[Block] = []
        changed = False
        for block in message.blocks:
            t = type(block)
            if t is Reasoning:
                if caps.reasoning_replay and target.owns(block.meta):
                    blocks.append(block)
                    continue
                changed = True
                if target.reasoning_policy == "as_text" and block.text:
                    blocks.append(Text(block.text))
                    repairs.append(Repair("reasoning_as_text"))
                else:
                    repairs.append(Repair("reasoning_dropped"))
            elif t is Text or t is ToolCall:
                if block.meta is None or target.owns(block.meta):
                    blocks.append(block)
                    continue
                changed = True
                if t is ToolCall or block.text:
                    blocks.append(replace(block, meta=None))
                # a foreign signature-only empty text part carries nothing once its meta is gone
            elif t is Image or t is ToolResult:
                blocks.append(block)
            else:  # pragma: no cover - Block is a closed union
                raise TypeError(f"unknown block {block!r}")
        if changed:
            changed_any = True
            if blocks:
                out.append(Message(message.role, tuple(blocks)))
            # an assistant message left with nothing is dropped: providers reject empty content
        else:
            out.append(message)
    return (tuple(out) if changed_any else messages), repairs
