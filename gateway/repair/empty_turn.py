"""Drop the assistant turns a client sent back empty, for targets that refuse them.

An agent that got an empty reply (a model that said nothing, a stop sequence hit at once) sends
it back as `{"role": "assistant", "content": ""}` on every later turn. OpenAI Chat takes that;
Anthropic ("all messages must have non-empty content"), Gemini ("contents.parts must not be
empty") and Mistral ("must have either content or tool_calls, but not none") refuse the whole
request, so for them the turn is removed and counted as `empty_turn_dropped`. It said nothing, so
nothing is lost; the count shows how often clients echo empty turns.

Runs first, on the client's transcript: a turn that another pass empties (its only reasoning was
not the target's) was not sent empty and is not counted here.
"""

from __future__ import annotations

from gateway.repair.empty_text import is_empty_turn
from gateway.repair.report import Repair
from gateway.transcript.model import Message
from gateway.transcript.target import Capabilities


def drop_empty_turns(
    messages: tuple[Message, ...], caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    if caps.empty_assistant_turn_ok or not any(is_empty_turn(m, caps) for m in messages):
        return messages, []
    kept = tuple(m for m in messages if not is_empty_turn(m, caps))
    return kept, [Repair("empty_turn_dropped") for _ in range(len(messages) - len(kept))]
