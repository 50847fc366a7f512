"""Role-order needs of a target, read from its capabilities (run after tool pairing, so every
assistant message with calls is already followed by its results).

- `merge_assistant_runs` (Anthropic): consecutive assistant messages become one, as they will on
  the wire, so the reasoning placement rules judge the message the provider sees.
- `calls_follow_user_turn` (Gemini): an assistant message with calls that follows another
  assistant message is merged into it ("function call turn comes immediately after a user turn or
  after a function response turn").
- `first_message_user` (Anthropic), and Gemini's call turn at the very start: a user message opens
  the conversation.
- `user_after_tool_forbidden` (Mistral: "Unexpected role 'user' after role 'tool'"): an assistant
  message goes between tool results and the user message that follows them.
- `last_message_user_or_tool` (Mistral: "Expected last role User or Tool"): a user message closes
  a conversation that ends with an assistant message.

The inserted messages hold fixed text. They are counted as `synthetic_tool_result`: of the
repair kinds (a fixed contract), it is the one meaning "the gateway inserted content the client
never sent", so an operator watching it sees every synthetic insertion; the detail says which.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.repair.retire import void_text_signatures
from gateway.transcript.model import Block, Message, Role, Text, ToolCall
from gateway.transcript.target import Capabilities

OPENING_USER_TEXT = "(earlier conversation omitted)"
AFTER_TOOLS_ASSISTANT_TEXT = "(tool results received)"
CLOSING_USER_TEXT = "Continue."


def _has_calls(message: Message) -> bool:
    return any(type(b) is ToolCall for b in message.blocks)


def fix_role_order(
    messages: tuple[Message, ...], caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    repairs: list[Repair] = []
    out: list[Message] = []
    changed = False
    for message in messages:
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous.role is Role.ASSISTANT
            and message.role is Role.ASSISTANT
            and (caps.merge_assistant_runs or (caps.calls_follow_user_turn and _has_calls(message)))
        ):
            out[-1] = _merge(previous, message, repairs)
            changed = True
            continue
        if (
            caps.user_after_tool_forbidden
            and previous is not None
            and previous.role is Role.TOOL
            and message.role is Role.USER
        ):
            out.append(Message(Role.ASSISTANT, (Text(AFTER_TOOLS_ASSISTANT_TEXT),)))
            repairs.append(Repair("synthetic_tool_result", "assistant message between tool results and user"))
            changed = True
        out.append(message)
    if (
        out
        and out[0].role is Role.ASSISTANT
        and (caps.first_message_user or (caps.calls_follow_user_turn and _has_calls(out[0])))
    ):
        out.insert(0, Message(Role.USER, (Text(OPENING_USER_TEXT),)))
        repairs.append(Repair("synthetic_tool_result", "user message opening the conversation"))
        changed = True
    if caps.last_message_user_or_tool and out and out[-1].role is Role.ASSISTANT:
        out.append(Message(Role.USER, (Text(CLOSING_USER_TEXT),)))
        repairs.append(Repair("synthetic_tool_result", "user message after a final assistant message"))
        changed = True
    return (tuple(out) if changed else messages), repairs


def _merge(first: Message, second: Message, repairs: list[Repair]) -> Message:
    """One assistant message from two. A text signature covers the text of the message it was
    issued in: it survives only where that text is still the merged message's whole text."""
    merged_text = first.text() + second.text()
    blocks: list[Block] = []
    for part in (first, second):
        own = list(part.blocks)
        if part.text() != merged_text:
            void_text_signatures(own, repairs)
        blocks.extend(own)
    return Message(Role.ASSISTANT, tuple(blocks))
