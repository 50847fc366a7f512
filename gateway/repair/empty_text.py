"""Remove text that carries nothing, and the messages it leaves empty.

An empty Text block without continuity says nothing, and providers reject empty messages
("all messages must have non-empty content", "contents.parts must not be empty"). Anthropic also
refuses whitespace-only text blocks and a final assistant text that ends in whitespace
(`blank_text_forbidden`). Nothing of meaning is lost, so nothing is counted: the passes that
drop meaningful content count their own changes. An assistant turn the client sent empty is
`empty_turn.py`'s: kept for a target that takes it, dropped and counted before this runs for one
that does not.
"""

from __future__ import annotations

from gateway.transcript.model import Block, Message, Role, Text, replace
from gateway.transcript.resume import Resumable
from gateway.transcript.target import Capabilities


def says_nothing(block: Block, blank_forbidden: bool) -> bool:
    if type(block) is not Text:
        return False
    if not block.text:
        return block.meta is None  # an empty text part with a signature is Gemini's answer seal
    return blank_forbidden and block.text.isspace()


def is_empty_turn(message: Message, caps: Capabilities) -> bool:
    """An assistant turn with blocks, none of which says anything (`content: ""`)."""
    blank = caps.blank_text_forbidden
    return (
        message.role is Role.ASSISTANT
        and bool(message.blocks)
        and all(says_nothing(b, blank) for b in message.blocks)
    )


# a conversation's walk so far, before the final trim (each message is judged on its own): its
# next turn walks only the messages after those they share (gateway/transcript/resume.py)
_SO_FAR = Resumable()


def drop_empty_text(messages: tuple[Message, ...], caps: Capabilities) -> tuple[Message, ...]:
    blank = caps.blank_text_forbidden
    context = (blank, caps.empty_assistant_turn_ok)
    done, held = _SO_FAR.find(messages, context)
    # the messages kept, made once one is dropped or changed (until then: the given ones)
    out: list[Message] | None = None
    if held is not None:
        held_out, changed = held
        if changed:
            out = list(held_out)
    keep_empty_turns = caps.empty_assistant_turn_ok
    text_kind = Text  # looked up for every block
    for position, message in enumerate(messages[done:] if done else messages, done):
        blocks = message.blocks
        # kept as it is: some blocks, none saying nothing (`says_nothing` inlined: this runs on
        # every block of every request)
        for b in blocks:
            if type(b) is text_kind and ((not b.text and b.meta is None) or (blank and b.text.isspace())):
                break
        else:
            if blocks:
                if out is not None:
                    out.append(message)
                continue
        if keep_empty_turns and is_empty_turn(message, caps):
            if out is not None:
                out.append(message)  # an empty assistant turn the target takes as it is
            continue
        if out is None:
            out = list(messages[:position])
        kept_blocks = tuple(b for b in blocks if not says_nothing(b, blank))
        if kept_blocks:
            out.append(Message(message.role, kept_blocks))
    kept = tuple(out) if out is not None else messages
    _SO_FAR.hold(messages, context, (kept, out is not None))
    if blank:
        trimmed = list(kept) if out is None else out
        if _trim_final_assistant_text(trimmed):
            return tuple(trimmed)
    return kept


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
