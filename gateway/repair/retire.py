"""What happens to reasoning a target cannot take, shared by every pass that retires some.

The target's `reasoning_policy` decides: `drop` (the default) removes the block, `as_text` keeps
its readable text as a plain Text block in the same place. Either way it is counted.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Reasoning, Text, replace
from gateway.transcript.target import Target

# a Repair is frozen: the detail-less ones are shared (a cold agent turn retires hundreds)
DROPPED = Repair("reasoning_dropped")
AS_TEXT = Repair("reasoning_as_text")


def retire_reasoning(
    block: Reasoning, target: Target, repairs: list[Repair], detail: str = ""
) -> Text | None:
    """The block's replacement under the target's policy (None: dropped), counted in `repairs`."""
    if target.reasoning_policy == "as_text" and block.text:
        repairs.append(Repair("reasoning_as_text", detail) if detail else AS_TEXT)
        return Text(block.text)
    repairs.append(Repair("reasoning_dropped", detail) if detail else DROPPED)
    return None


def void_text_signatures(blocks: list[Block], repairs: list[Repair]) -> None:
    """Continuity on a Text block signs the visible text of the message it was issued in (Gemini
    binds a text signature to the turn's whole text). Once repair changed that text, the signature
    would be rejected as forged: remove it, in place, and count it."""
    for n, block in enumerate(blocks):
        if type(block) is Text and block.meta is not None:
            blocks[n] = replace(block, meta=None)
            repairs.append(Repair("reasoning_dropped", "text signature of a changed message"))
