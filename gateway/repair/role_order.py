"""Role-order needs of a target, read from its capabilities (run after tool pairing, so every
assistant message with calls is already followed by its results).

- `merge_assistant_runs` (Anthropic): consecutive assistant messages become one, as they will on
  the wire, so the reasoning placement rules judge the message the provider sees.
- `merge_user_turns` (Anthropic): the user side of a turn becomes one message, its tool results
  first ("tool_result blocks must come first"), then the user's own content; `merge_tool_runs`
  (Gemini): consecutive tool messages (the results of one step) become one. This pass is the only
  place messages merge: encoders map canonical messages to wire messages one to one.
- `system_messages_in_place` unset (Anthropic, Gemini, Mistral): an instruction given
  mid-conversation becomes user text at that point, marked as the system's
  (`system_message_as_user`).
- `calls_follow_user_turn` (Gemini): an assistant message with calls that follows another
  assistant message is merged into it ("function call turn comes immediately after a user turn or
  after a function response turn").
- `first_message_user` (Anthropic), and Gemini's call turn at the very start: a user message opens
  the conversation.
- `user_after_tool_forbidden` (Mistral: "Unexpected role 'user' after role 'tool'"): an assistant
  message goes between tool results and the user message that follows them.
- `last_message_user_or_tool` (Mistral: "Expected last role User or Tool"): a user message closes
  a conversation that ends with an assistant message.

The inserted messages hold fixed text and are counted as `synthetic_message` (the detail says
which); a result inserted for a call without one is `synthetic_tool_result` (tool pairing).
"""

from __future__ import annotations

from operator import attrgetter

from gateway.repair.report import Repair
from gateway.repair.retire import void_text_signatures
from gateway.transcript.model import Block, Message, Role, Text, ToolCall, ToolResult
from gateway.transcript.resume import Resumable
from gateway.transcript.target import Capabilities

OPENING_USER_TEXT = "(earlier conversation omitted)"
SYSTEM_TEXT_TEMPLATE = "<system>\n{}\n</system>"
AFTER_TOOLS_ASSISTANT_TEXT = "(tool results received)"
CLOSING_USER_TEXT = "Continue."


def _has_calls(message: Message) -> bool:
    return any(type(b) is ToolCall for b in message.blocks)


def fix_role_order(
    messages: tuple[Message, ...], caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    repairs: list[Repair] = []
    # runs of messages that become one, each merged once at the end (linear in the transcript,
    # however long a run is)
    runs: list[list[Message]] = []
    changed = False
    for message in messages if _may_join(messages, caps) else ():
        if message.role is Role.SYSTEM and not caps.system_messages_in_place:
            message = _system_as_user(message)
            repairs.append(Repair("system_message_as_user"))
            changed = True
            if not message.blocks:
                continue
        previous = runs[-1][-1] if runs else None
        if previous is not None and _joins(previous, message, caps):
            runs[-1].append(message)
            changed = True
            continue
        if (
            caps.user_after_tool_forbidden
            and previous is not None
            and previous.role is Role.TOOL
            and message.role is Role.USER
        ):
            runs.append([Message(Role.ASSISTANT, (Text(AFTER_TOOLS_ASSISTANT_TEXT),))])
            repairs.append(Repair("synthetic_message", "assistant message between tool results and user"))
            changed = True
        runs.append([message])
    out = (
        [run[0] if len(run) == 1 else _merge_run(run, repairs) for run in runs] if changed else list(messages)
    )
    if (
        out
        and out[0].role is Role.ASSISTANT
        and (caps.first_message_user or (caps.calls_follow_user_turn and _has_calls(out[0])))
    ):
        out.insert(0, Message(Role.USER, (Text(OPENING_USER_TEXT),)))
        repairs.append(Repair("synthetic_message", "user message opening the conversation"))
        changed = True
    if caps.last_message_user_or_tool and out and out[-1].role is Role.ASSISTANT:
        out.append(Message(Role.USER, (Text(CLOSING_USER_TEXT),)))
        repairs.append(Repair("synthetic_message", "user message after a final assistant message"))
        changed = True
    return (tuple(out) if changed else messages), repairs


def _may_join(messages: tuple[Message, ...], caps: Capabilities) -> bool:
    """Whether the loop over runs can change anything: a system message to move, or two
    neighbours whose roles may join or need a message between them. Most transcripts have
    neither, and their roles written one letter a message tell it at C speed."""
    codes = _role_codes(messages)
    if not caps.system_messages_in_place and _SYSTEM in codes:
        return True
    if _ASSISTANT + _ASSISTANT in codes:
        return True
    if caps.merge_user_turns and any(pair in codes for pair in _USER_SIDE_PAIRS):
        return True
    if caps.merge_tool_runs and _TOOL + _TOOL in codes:
        return True
    return caps.user_after_tool_forbidden and _TOOL + _USER in codes


_ROLE = attrgetter("role")
# one letter a role: two neighbouring messages' roles are a two-letter substring
_CODE = {Role.USER: "u", Role.ASSISTANT: "a", Role.TOOL: "t", Role.SYSTEM: "s"}
_USER, _ASSISTANT, _TOOL, _SYSTEM = (_CODE[r] for r in (Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM))
_USER_SIDE_PAIRS = tuple(a + b for a in (_USER, _TOOL) for b in (_USER, _TOOL))
_LETTER = _CODE.__getitem__
# a conversation's roles so far (a left-to-right fold), resumed on its next turn
_CODES_SO_FAR = Resumable()


def _role_codes(messages: tuple[Message, ...]) -> str:
    """The messages' roles, one letter each (`_CODE`): from those held for the messages the
    conversation's last turn shared (gateway/transcript/resume.py), then the new messages'.
    A set of neighbouring role pairs cost ~0.1 ms a 1,000 messages (a tuple built and hashed a
    pair); the letters cost a third of it and answer the same questions by substring."""
    done, held = _CODES_SO_FAR.find(messages, None)
    new = "".join(map(_LETTER, map(_ROLE, messages[done:] if done else messages)))
    codes = held + new if held is not None else new
    _CODES_SO_FAR.hold(messages, None, codes)
    return codes


def _system_as_user(message: Message) -> Message:
    texts = tuple(Text(SYSTEM_TEXT_TEMPLATE.format(b.text)) for b in message.blocks if b.text)
    return Message(Role.USER, texts)


_USER_SIDE = (Role.USER, Role.TOOL)


def _joins(previous: Message, message: Message, caps: Capabilities) -> bool:
    """`message` becomes part of the run that ends with `previous`."""
    if previous.role is Role.ASSISTANT:
        return message.role is Role.ASSISTANT and (
            caps.merge_assistant_runs or (caps.calls_follow_user_turn and _has_calls(message))
        )
    if caps.merge_user_turns:
        return previous.role in _USER_SIDE and message.role in _USER_SIDE
    return caps.merge_tool_runs and previous.role is Role.TOOL and message.role is Role.TOOL


def _merge_run(run: list[Message], repairs: list[Repair]) -> Message:
    if run[0].role is Role.ASSISTANT:
        return _merge_assistant(run, repairs)
    # the user side of a turn: tool results first (in order), then the rest (in order)
    blocks = [b for message in run for b in message.blocks]
    results = tuple(b for b in blocks if type(b) is ToolResult)
    if not results:
        return Message(Role.USER, tuple(blocks))
    return Message(Role.TOOL, results + tuple(b for b in blocks if type(b) is not ToolResult))


def _merge_assistant(run: list[Message], repairs: list[Repair]) -> Message:
    """One assistant message from several. A text signature covers the text of the message it
    was issued in: it survives only where that text is still the merged message's whole text."""
    texts = [part.text() for part in run]
    merged_text = "".join(texts)
    blocks: list[Block] = []
    for part, text in zip(run, texts, strict=True):
        own = list(part.blocks)
        if text != merged_text:
            void_text_signatures(own, repairs)
        blocks.extend(own)
    return Message(Role.ASSISTANT, tuple(blocks))
