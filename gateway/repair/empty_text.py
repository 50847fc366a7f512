"""Remove text that carries nothing, and the messages it leaves empty.

An empty Text block without continuity says nothing, and providers reject empty messages
("all messages must have non-empty content", "contents.parts must not be empty"). Anthropic also
refuses whitespace-only text blocks and a final assistant text that ends in whitespace
(`blank_text_forbidden`). Nothing of meaning is lost, so nothing is counted: the passes that
drop meaningful content count their own changes.
"""

from __future__ import annotations

from dataclasses import replace

from gateway.transcript.model import Block, Message, Role, Text
from gateway.transcript.target import Capabilities


def _says_nothing(block: Block, blank_forbidden: bool) -> bool:
    if type(block) is not Text:
        return False
    if not block.text:
        return block.meta is None  # an empty text part with a signature is Gemini's answer seal
    return blank_forbidden and block.text.isspace()


def drop_empty_text(messages: tuple[Message, ...], caps: Capabilities) -> tuple[Message, ...]:
    blank = caps.blank_text_forbidden
    out: list[Message] = []
    changed = False
    for message in messages:
        if not any(_says_nothing(b, blank) for b in message.blocks) and message.blocks:
            out.append(message)
            continue
        changed = True
        blocks = tuple(b for b in message.blocks if not _says_nothing(b, blank))
        if blocks:
            out.append(Message(message.role, blocks))
    if blank:
        changed = _trim_final_assistant_text(out) or changed
    return tuple(out) if changed else messages


def _trim_final_assistant_text(out: list[Message]) -> bool:
    """Anthropic: "final assistant content cannot end with trailing whitespace"."""
    changed = False
    while out and out[-1].role is Role.ASSISTANT:
        blocks = list(out[-1].blocks)
        last = blocks[-1]
        if type(last) is not Text or last.text == last.text.rstrip():
            break
        changed = True
        trimmed = last.text.rstrip()
        if trimmed:
            blocks[-1] = replace(last, text=trimmed)
        else:
            blocks.pop()
        if blocks:
            out[-1] = Message(Role.ASSISTANT, tuple(blocks))
        else:
            out.pop()
    return changed
