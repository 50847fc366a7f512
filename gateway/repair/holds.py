"""What a transcript holds that some repair pass acts on, gathered in one walk over its blocks.

Most requests hold nothing most passes act on (a short chat turn has no calls, reasoning, media,
server-tool history, cache marks or blank text), and each pass would still walk every message to
find that out. `prepare` walks once and skips a pass whose subject the client's transcript does
not hold: such a pass hands back its input object and reports nothing, so skipping it changes no
result (tests/repair/test_holds.py compares with every pass run). Once a pass changed the
messages, they are no longer those described here and every later pass runs, with one exception
`prepare` knows: the reasoning policy dropping reasoning and foreign meta leaves messages without
blank text as they were (no text blanked, an emptied message dropped).
"""

from __future__ import annotations

from msgspec import Struct

from gateway.transcript.model import (
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
)
from gateway.transcript.resume import Resumable


class Holds(Struct, frozen=True, gc=False):  # one a request: a Struct's init costs a tenth
    """Each flag: whether any block of the transcript is one a pass acts on (over every role:
    a pass that only looks at assistant messages is skipped only when none has it anywhere)."""

    calls: bool = True  # ToolCall blocks
    custom_calls: bool = True  # ToolCall blocks of custom tools
    results: bool = True  # ToolResult blocks or tool messages
    reasoning: bool = True  # Reasoning blocks
    meta: bool = True  # Text or ToolCall blocks with continuity meta
    media: bool = True  # Image and Document blocks, tool results with images or documents
    server: bool = True  # server-tool calls and results, text with citations
    blank: bool = True  # text that is empty or whitespace only, messages without blocks
    cached: bool = True  # blocks with a prompt-cache breakpoint


EVERYTHING = Holds()  # holds everything: every pass runs (what tests compare with)


# a conversation's holdings so far (an "any" over its messages): its next turn walks only the new
# messages (gateway/transcript/resume.py); a transcript's first sight, what its decoder read
# (`plain_holds`)
_SO_FAR = Resumable()


def plain_holds(
    messages: tuple[Message, ...], calls: bool, results: bool, reasoning: bool, blank: bool
) -> None:
    """What a decoder read `messages` to hold from the plain shapes it decoded them from (their
    calls, results, reasoning, blank text; no other kind the walk looks for: Chat's typed
    reading, gateway/ingress/chat/typed.py), held as the walk's outcome for them: a long
    transcript seen first is not walked again (~1.6M instructions for 1,000 messages).
    tests/ingress/test_chat_typed.py compares it with the walk."""
    _SO_FAR.hold(messages, None, (calls, False, results, reasoning, False, False, False, blank, False))


def holds(messages: tuple[Message, ...]) -> Holds:
    done, held = _SO_FAR.find(messages, None)
    if held is None:
        calls = custom = results = reasoning = meta = media = server = blank = cached = False
    else:
        calls, custom, results, reasoning, meta, media, server, blank, cached = held
    # the walk's names, local: it looks them up for every block
    tool, text_kind, call_kind, result_kind, reasoning_kind = Role.TOOL, Text, ToolCall, ToolResult, Reasoning
    for message in messages[done:] if done else messages:
        blocks = message.blocks
        if not blocks:
            blank = True
        elif message.role is tool:
            results = True
        for b in blocks:
            t = type(b)
            # an agent's blocks are mostly calls, results and reasoning: asked first
            if t is call_kind:
                calls = True
                if b.custom:
                    custom = True
                if b.meta is not None:
                    meta = True
            elif t is result_kind:
                results = True
                if b.images or b.documents:
                    media = True
            elif t is reasoning_kind:
                reasoning = True
                continue  # never carries a cache breakpoint
            elif t is text_kind:
                if not b.text or b.text.isspace():
                    blank = True
                if b.meta is not None:
                    meta = True
                if b.citations:
                    server = True
            elif t is Image or t is Document:
                media = True
            elif t is ServerToolCall or t is ServerToolResult:
                server = True
                continue  # never carries a cache breakpoint
            else:
                raise TypeError(f"unknown block kind {t.__name__}")
            if b.cache is not None:
                cached = True
    found = Holds(calls, custom, results, reasoning, meta, media, server, blank, cached)
    _SO_FAR.hold(messages, None, (calls, custom, results, reasoning, meta, media, server, blank, cached))
    return found
