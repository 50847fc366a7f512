"""Reasoning goes to a target only with that target's own continuity meta (DESIGN.md 4.3).

Foreign reasoning is dropped (policy `drop`, the default) or rendered as plain text (`as_text`);
continuity meta on text and tool calls that the target does not own is removed, because it would
be rejected (or, worse, silently misread) by a provider that did not issue it. The same token
replayed twice in one request is kept once: providers issue each token once, and some refuse a
repeated one (Responses: "Duplicate item found").

`strict` (rejection recovery) replays no token at all: the provider just refused something we
replayed, and we cannot tell which token it was. What carries no token stays, so that strict
repair is idempotent too: an empty reasoning stub of the target's (DeepSeek/Kimi
`reasoning_content: ""`), a call's native id and the documented placeholder signature.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.repair.retire import DROPPED, retire_reasoning, void_text_signatures
from gateway.transcript.model import (
    NATIVE_ID,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Role,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolCall,
    ToolResult,
    replace,
)
from gateway.transcript.resume import Resumable
from gateway.transcript.target import Capabilities, Target


def _token_key(block: Reasoning) -> tuple[str, str] | None:
    """Identity of a replayable token; None for meta without data (chat-family reasoning carries
    no token, so identical texts are not duplicates of anything)."""
    meta = block.meta
    if meta is None or not meta.data:
        return None
    return block.text, repr(sorted(meta.data.items()))


# a conversation's walk so far (a left-to-right fold: the tokens kept so far are its state),
# resumed by its next turn after the messages they share (gateway/transcript/resume.py): its prefix
# comes out as the same objects turn after turn, which lets the encoders reuse their rendering
_SO_FAR = Resumable()


def _is_placeholder(key: str, value: object, caps: Capabilities) -> bool:
    return key == caps.thought_signature_key and value == caps.thought_signature_placeholder


def apply_reasoning_policy(
    messages: tuple[Message, ...], target: Target, caps: Capabilities, strict: bool = False
) -> tuple[tuple[Message, ...], list[Repair]]:
    context = (target, caps, strict)
    done, held = _SO_FAR.find(messages, context)
    if held is None:
        repairs: list[Repair] = []
        out: list[Message] = []
        changed_any = False
        kept_tokens: set[tuple[str, str]] = set()
    else:
        held_out, held_tokens, changed_any, held_repairs = held
        out, kept_tokens, repairs = list(held_out), set(held_tokens), list(held_repairs)

    def owned(meta: Continuity | None) -> bool:
        return not strict and target.owns(meta)

    def owned_reasoning(block: Reasoning) -> bool:
        if not strict:
            return target.owns(block.meta)
        return target.owns(block.meta) and not block.text and not block.meta.data

    def strict_call_meta(meta: Continuity | None) -> Continuity | None:
        if not target.owns(meta):
            return None
        data = {k: v for k, v in meta.data.items() if k == NATIVE_ID or _is_placeholder(k, v, caps)}
        if len(data) == len(meta.data):
            return meta
        return target.continuity(data) if data else None

    replay = caps.reasoning_replay
    drops = target.reasoning_policy != "as_text"  # retire_reasoning's choice, made once
    # the walk's names, local: it looks them up for every block
    assistant, reasoning_kind, text_kind, call_kind = Role.ASSISTANT, Reasoning, Text, ToolCall
    keep = out.append
    for message in messages[done:] if done else messages:
        if message.role is not assistant:
            keep(message)
            continue
        if drops and len(message.blocks) == 2:
            # an agent's turn from a Chat client, half of a long transcript: reasoning without a
            # token (never the target's own: dropped, strict or not) and one call without meta
            # (kept), made as the walk below makes it, without its list and a closure's call a block
            thought, call = message.blocks
            if (
                type(thought) is reasoning_kind
                and thought.meta is None
                and type(call) is call_kind
                and call.meta is None
            ):
                repairs.append(DROPPED)
                changed_any = True
                keep(Message(assistant, (call,)))
                continue
        blocks: list[Block] = []
        changed = False
        as_text = False
        for block in message.blocks:
            t = type(block)
            if t is reasoning_kind:
                if replay and owned_reasoning(block):
                    key = _token_key(block)
                    if key is None or key not in kept_tokens:
                        if key is not None:
                            kept_tokens.add(key)
                        blocks.append(block)
                        continue
                    # its text is in the transcript already: a duplicate is dropped, never as_text
                    changed = True
                    repairs.append(Repair("reasoning_dropped", "token replayed twice"))
                    continue
                changed = True
                if drops:
                    repairs.append(DROPPED)
                    continue
                text = retire_reasoning(block, target, repairs)
                if text is not None:
                    blocks.append(text)
                    as_text = True
            elif t is call_kind and strict:
                meta = strict_call_meta(block.meta)
                blocks.append(block if meta is block.meta else replace(block, meta=meta))
                changed = changed or meta is not block.meta
            elif t is text_kind or t is call_kind:
                if block.meta is None or owned(block.meta):
                    blocks.append(block)
                    continue
                changed = True
                if t is call_kind or block.text:
                    blocks.append(replace(block, meta=None))
                # a foreign signature-only empty text part carries nothing once its meta is gone
            elif (
                t is Image or t is ToolResult or t is Document or t is ServerToolCall or t is ServerToolResult
            ):
                # server-tool history: repair/server_tools.py already rendered another issuer's
                blocks.append(block)
            else:  # pragma: no cover - Block is a closed union
                raise TypeError(f"unknown block {block!r}")
        if changed:
            changed_any = True
            if as_text:
                void_text_signatures(blocks, repairs)
            if blocks:
                keep(Message(message.role, tuple(blocks)))
            # an assistant message left with nothing is dropped: providers reject empty content
        else:
            keep(message)
    result = tuple(out) if changed_any else messages
    _SO_FAR.hold(messages, context, (result, frozenset(kept_tokens), changed_any, tuple(repairs)))
    return result, repairs
