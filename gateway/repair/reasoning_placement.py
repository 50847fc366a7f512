"""Where in an assistant message a target accepts its own reasoning (capability data).

- `reasoning_leads_message` (Anthropic): "If an assistant message contains any thinking blocks,
  the first block must be thinking" and "The final block in an assistant message cannot be
  `thinking`". A message that does not start with reasoning keeps none; trailing reasoning is cut.
- `reasoning_precedes_output` (OpenAI Responses): a reasoning item must be directly followed by
  the output it was generated before (a message or a function call); reasoning followed by
  anything else ("... was provided without its required following item") is retired.

Retired reasoning follows the target's policy (drop or as_text) and is counted. Runs after the
reasoning policy, so every Reasoning block left is the target's own.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.repair.retire import retire_reasoning, void_text_signatures
from gateway.transcript.model import Block, Message, Reasoning, Role, Text, ToolCall
from gateway.transcript.target import Capabilities, Target

_OUTPUT = (Text, ToolCall)


def place_reasoning(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    if not (caps.reasoning_leads_message or caps.reasoning_precedes_output):
        return messages, []
    repairs: list[Repair] = []
    out: list[Message] = []
    changed = False
    for message in messages:
        if message.role is not Role.ASSISTANT or not any(type(b) is Reasoning for b in message.blocks):
            out.append(message)
            continue
        misplaced = _misplaced(message.blocks, target, caps)
        if not misplaced:
            out.append(message)
            continue
        changed = True
        blocks = retire_at(
            message.blocks, misplaced, target, repairs, "reasoning where the target refuses it"
        )
        if blocks:
            out.append(Message(Role.ASSISTANT, blocks))
    return (tuple(out) if changed else messages), repairs


def _misplaced(blocks: tuple[Block, ...], target: Target, caps: Capabilities) -> set[int]:
    bad: set[int] = set()
    if caps.reasoning_leads_message:
        if type(blocks[0]) is not Reasoning:
            bad.update(n for n, b in enumerate(blocks) if type(b) is Reasoning)
        else:
            n = len(blocks) - 1
            while n >= 0 and type(blocks[n]) is Reasoning:
                bad.add(n)
                n -= 1
    if caps.reasoning_precedes_output:
        # right to left, with what follows each block once the blocks after it are settled:
        # reasoning retired as text is output for the reasoning before it, dropped reasoning is
        # nothing at all
        as_text = target.reasoning_policy == "as_text"
        follower: type | None = None
        for n in range(len(blocks) - 1, -1, -1):
            block = blocks[n]
            t = type(block)
            if t is Reasoning and (n in bad or follower not in _OUTPUT):
                bad.add(n)
                if as_text and block.text:
                    follower = Text
                continue
            follower = t
    return bad


def retire_at(
    blocks: tuple[Block, ...], indices: set[int], target: Target, repairs: list[Repair], detail: str
) -> tuple[Block, ...]:
    """`blocks` with the Reasoning blocks at `indices` retired under the target's policy."""
    out: list[Block] = []
    as_text = False
    for n, block in enumerate(blocks):
        if n not in indices:
            out.append(block)
            continue
        text = retire_reasoning(block, target, repairs, detail)
        if text is not None:
            out.append(text)
            as_text = True
    if as_text:
        void_text_signatures(out, repairs)
    return tuple(out)
