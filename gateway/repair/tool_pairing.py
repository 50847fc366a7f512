"""Tool-call pairing, fan-out closure and result placement (DESIGN.md 4.1, seed 002 section 4).

The canonical shape every provider accepts: right after the assistant message holding tool
calls, the results of exactly those calls, one per call. Concretely:
- a result whose call is not in an earlier message is an orphan: dropped;
- a second result for a call is a duplicate: dropped, the first REAL one kept (a synthetic result
  an earlier repair inserted, tagged `ToolResult.synthetic`, never wins over a real one that
  arrived later; a client's result is never taken for one, whatever its text);
- a call without a result gets a synthetic error result stating it was cancelled;
- a result anywhere else (after a user message, after a later turn, inside a user message) is
  moved to the calling message; user messages that sat between fall in place after the results.
Results already in place stay exactly as they are (one tool message per result, the order the
client gave); anything rebuilt becomes ONE tool message with the results in the calls' order.

Duplicate call ids would pair ambiguously and are refused by providers ("`tool_use` ids must be
unique"): a later call reusing an id is renamed deterministically, with the results that follow it.
"""

from __future__ import annotations

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Message, Role, ToolCall, ToolResult, replace
from gateway.transcript.resume import Resumable

SYNTHETIC_RESULT_TEXT = "The tool call was cancelled before it produced a result."


def synthetic_result(call_id: str) -> ToolResult:
    return ToolResult(call_id, SYNTHETIC_RESULT_TEXT, is_error=True, synthetic=True)


# -- duplicate call ids --------------------------------------------------------------------------


def unique_call_ids(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], list[Repair]]:
    """Rename every call that reuses an earlier call's id (`<id>_<n>`, the first n not in use),
    and the results that answer it: a result answers the latest call with its id before it.
    A renamed call loses its continuity meta: it named the original call (native id, item id)."""
    if not _reuses_a_call_id(messages):
        return messages, []  # the common case: nothing to rewrite

    taken = {b.id for m in messages for b in m.blocks if type(b) is ToolCall}
    taken.update(b.call_id for m in messages for b in m.blocks if type(b) is ToolResult)
    latest: dict[str, str] = {}  # id as written -> id of the latest call written with it
    repairs: list[Repair] = []
    out: list[Message] = []
    for message in messages:
        blocks: list[Block] = []
        for block in message.blocks:
            t = type(block)
            if t is ToolCall and message.role is Role.ASSISTANT:
                if block.id in latest:
                    n = 2
                    while f"{block.id}_{n}" in taken:
                        n += 1
                    new_id = f"{block.id}_{n}"
                    taken.add(new_id)
                    latest[block.id] = new_id
                    block = replace(block, id=new_id, meta=None)
                    repairs.append(Repair("tool_id_projected", "duplicate call id renamed"))
                else:
                    latest[block.id] = block.id
            elif t is ToolResult:
                answered = latest.get(block.call_id)
                if answered is not None and answered != block.call_id:
                    block = replace(block, call_id=answered)
            blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return tuple(out), repairs


# the two checks' walks so far over a conversation that passed them (each a left-to-right fold):
# its next turn walks only the new messages (gateway/transcript/resume.py)
_IDS_SO_FAR = Resumable()
_PAIRED_SO_FAR = Resumable()


def _reuses_a_call_id(messages: tuple[Message, ...]) -> bool:
    done, held = _IDS_SO_FAR.find(messages, None)
    assistant, call_kind = Role.ASSISTANT, ToolCall  # looked up for every message
    ids = [
        b.id
        for m in (messages[done:] if done else messages)
        if m.role is assistant
        for b in m.blocks
        if type(b) is call_kind
    ]
    seen = set(ids)
    if len(seen) != len(ids) or (held is not None and not seen.isdisjoint(held)):
        return True
    if held is not None:
        seen |= held
    _IDS_SO_FAR.hold(messages, None, seen)
    return False


# -- pairing and placement -----------------------------------------------------------------------


def pair_tool_results(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], list[Repair]]:
    """Expects unique call ids (run `unique_call_ids` first)."""
    if already_paired(messages):
        return messages, []
    return pair_in_general(messages)


def pair_in_general(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], list[Repair]]:
    """The pass without `already_paired`'s shortcut (tests check that the two agree)."""
    call_at: dict[str, int] = {}
    for i, message in enumerate(messages):
        if message.role is Role.ASSISTANT:
            for block in message.blocks:
                if type(block) is ToolCall:
                    call_at[block.id] = i

    repairs: list[Repair] = []
    chosen: dict[str, tuple[int, int]] = {}  # call id -> (message, block) of the result kept
    dropped: set[tuple[int, int]] = set()
    for i, message in enumerate(messages):
        for j, block in enumerate(message.blocks):
            if type(block) is not ToolResult:
                continue
            at = call_at.get(block.call_id)
            if at is None or at >= i:
                dropped.add((i, j))
                repairs.append(Repair("orphan_tool_result_dropped"))
                continue
            first = chosen.get(block.call_id)
            if first is None:
                chosen[block.call_id] = (i, j)
                continue
            fi, fj = first
            if messages[fi].blocks[fj].synthetic and not block.synthetic:
                chosen[block.call_id] = (i, j)
                dropped.add(first)
            else:
                dropped.add((i, j))
            repairs.append(Repair("duplicate_tool_result_dropped"))

    out: list[Message] = []
    changed = bool(dropped)
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        if message.role is not Role.ASSISTANT or not any(type(b) is ToolCall for b in message.blocks):
            kept = _without_results(message)
            if kept is not message:
                changed = True
            if kept is not None:
                out.append(kept)
            i += 1
            continue
        kept = _without_results(message)
        if kept is not message:
            changed = True
        out.append(kept)  # never None: it holds calls
        calls = [b for b in message.blocks if type(b) is ToolCall]
        run_end = i + 1
        while run_end < n and messages[run_end].role is Role.TOOL:
            run_end += 1
        run = range(i + 1, run_end)
        if _in_place(messages, run, calls, chosen, dropped):
            for k in run:
                tool = messages[k]
                blocks = tuple(b for j, b in enumerate(tool.blocks) if (k, j) not in dropped)
                if len(blocks) != len(tool.blocks):
                    tool = Message(Role.TOOL, blocks)
                if blocks:
                    out.append(tool)
            i = run_end
            continue
        changed = True
        results: list[Block] = []
        for call in calls:
            at = chosen.get(call.id)
            if at is None:
                results.append(synthetic_result(call.id))
                repairs.append(Repair("synthetic_tool_result"))
                continue
            results.append(messages[at[0]].blocks[at[1]])
            if at[0] not in run:
                repairs.append(Repair("tool_result_moved"))
        out.append(Message(Role.TOOL, tuple(results)))
        i += 1  # results met further on were placed here: `_without_results` removes them there
    return (tuple(out) if changed else messages), repairs


def already_paired(messages: tuple[Message, ...]) -> bool:
    """Every call answered right after it by exactly its results, and no result anywhere else:
    what a well-behaved agent sends, checked in one cheap scan (the general pass would hand back
    the same transcript; tests/repair/test_tool_pairing.py checks they agree)."""
    done, held = _PAIRED_SO_FAR.find(messages, None)
    pending: set[str] = set() if held is None else set(held)
    # the walk's names, local: it looks them up for every block
    tool, assistant, call_kind, result_kind = Role.TOOL, Role.ASSISTANT, ToolCall, ToolResult
    add, remove = pending.add, pending.remove
    for message in messages[done:] if done else messages:
        role, blocks = message.role, message.blocks
        if role is tool:
            if not pending:
                return False
            for block in blocks:
                if type(block) is not result_kind or block.call_id not in pending:
                    return False
                remove(block.call_id)
            continue
        if pending:
            return False
        if role is assistant:
            if len(blocks) == 1:  # an agent's turn: one call (or text)
                block = blocks[0]
                t = type(block)
                if t is call_kind:
                    add(block.id)
                elif t is result_kind:
                    return False
                continue
            calls = 0
            for block in blocks:
                t = type(block)
                if t is call_kind:
                    add(block.id)
                    calls += 1
                elif t is result_kind:
                    return False
            if len(pending) != calls:
                return False
        else:
            for block in message.blocks:
                if type(block) is result_kind:
                    return False
    _PAIRED_SO_FAR.hold(messages, None, frozenset(pending))
    return not pending


def _in_place(
    messages: tuple[Message, ...],
    run: range,
    calls: list[ToolCall],
    chosen: dict[str, tuple[int, int]],
    dropped: set[tuple[int, int]],
) -> bool:
    """The tool messages right after the calls hold exactly their kept results (plus, at most,
    results dropped anyway)."""
    wanted = {chosen.get(call.id) for call in calls}
    if None in wanted:
        return False
    found = 0
    for k in run:
        for j, block in enumerate(messages[k].blocks):
            if type(block) is ToolResult and (k, j) not in dropped:
                if (k, j) not in wanted:
                    return False
                found += 1
    return found == len(wanted)


def _without_results(message: Message) -> Message | None:
    """The message without the result blocks it holds (outside an in-place run every result is
    either dropped or placed after its call); None when nothing is left."""
    if not any(type(b) is ToolResult for b in message.blocks):
        return message
    blocks = tuple(b for b in message.blocks if type(b) is not ToolResult)
    return Message(message.role, blocks) if blocks else None
