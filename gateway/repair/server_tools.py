"""Server-tool history and citations for a target that did not issue them.

A tool the provider ran itself (web search, web fetch, file search, grounding) replays intact only
to its issuer (its wire form may be encrypted). For every other target it becomes plain assistant
text saying what was asked, what was found and what was cited (`server_tool_as_text`), and
citations another issuer made become a line of sources after the text they annotate
(`citations_as_text`): the model keeps the knowledge, the provider sees only text.

Pure and idempotent: rendered blocks are Text without citations.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.transcript.model import (
    Block,
    Message,
    Role,
    ServerToolCall,
    ServerToolResult,
    Text,
    replace,
)
from gateway.transcript.render import call_text, citations_text, result_text
from gateway.transcript.target import Capabilities, Target


def render_server_tools(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    replays = caps.server_tool_replay
    repairs: list[Repair] = []
    out: list[Message] | None = None
    for n, message in enumerate(messages):
        blocks = _blocks(message, target, replays, repairs) if message.role is Role.ASSISTANT else None
        if blocks is None:
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = list(messages[:n])
        out.append(Message(message.role, blocks))
    return (messages, []) if out is None else (tuple(out), repairs)


def _blocks(
    message: Message, target: Target, replays: bool, repairs: list[Repair]
) -> tuple[Block, ...] | None:
    """The message's blocks for `target`, or None when they stay as they are."""

    def owned(meta: object) -> bool:
        return replays and target.owns(meta)  # type: ignore[arg-type]

    changed = False
    blocks: list[Block] = []
    for block in message.blocks:
        t = type(block)
        if (t is ServerToolCall or t is ServerToolResult) and not owned(block.meta):
            changed = True
            repairs.append(Repair("server_tool_as_text", f"{block.name} (issued by {_issuer(block)})"))
            text = call_text(block) if t is ServerToolCall else result_text(block)
            # a line of its own where a wire joins a message's text blocks into one string
            blocks.append(Text("\n" + text if blocks else text))
        elif t is Text and block.citations and not all(owned(c.meta) for c in block.citations):
            changed = True
            repairs.append(Repair("citations_as_text", f"{len(block.citations)} citation(s)"))
            blocks.append(replace(block, citations=()))
            blocks.append(Text("\n" + citations_text(block.citations)))
        else:
            blocks.append(block)
    return tuple(blocks) if changed else None


def _issuer(block: ServerToolCall | ServerToolResult) -> str:
    return block.meta.kind if block.meta is not None else "unknown"
