"""Project canonical tool-call ids to a target's id format at egress (DESIGN.md 4.2).

Deterministic and collision-free within one request; a call and its results get the same id. A
call that returns to the provider that issued it gets that provider's original id back. Kimi ids
are positional (`functions.{name}:{global index}`): they are always rebuilt from the call's place
in this transcript, which is what Kimi models act on reliably, and unique by construction (a
native id from an earlier request names an index that compaction may since have shifted).
"""

from __future__ import annotations

import hashlib
import re
import sys
from functools import lru_cache
from itertools import islice

from gateway.transcript.model import NATIVE_ID, Block, Message, Role, ToolCall, ToolResult, replace
from gateway.transcript.resume import Resumable
from gateway.transcript.target import Target, ToolIdRule

_USER = Role.USER
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _base62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 62)
        out.append(_ALPHABET[r])
    return "".join(out) or "0"


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _kimi_id(name: str, index: int, max_len: int) -> str:
    suffix = f":{index}"
    room = max_len - len("functions.") - len(suffix)
    return f"functions.{(_UNSAFE_NAME_CHARS.sub('_', name) or 'tool')[:room]}{suffix}"


def _derive(canonical: str, rule: ToolIdRule, salt: int) -> str:
    digest = _base62(hashlib.sha256(f"{canonical}#{salt}".encode()).digest())
    if rule.style == "alnum9":
        return digest[:9]
    room = max(8, min(24, rule.max_len - len(rule.prefix)))
    return rule.prefix + digest[:room]


# a conversation's projection so far: the walk is a left-to-right fold (an id is assigned where it
# first appears), so the next turn resumes after the messages it shares (gateway/transcript/resume.py)
_SO_FAR = Resumable()


def project_tool_ids(
    messages: tuple[Message, ...], target: Target, rule: ToolIdRule
) -> tuple[tuple[Message, ...], dict[str, str], int]:
    """Returns the projected messages, the provider id -> canonical id map, and how many ids had
    to be rewritten into the target's format (an issuer getting its own ids back is no repair)."""
    pattern = re.compile(rule.pattern)
    context = (target, rule)
    done, held = _SO_FAR.find(messages, context)
    if held is None:
        so_far: tuple[Message, ...] = ()
        forward: dict[str, str] = {}  # canonical -> provider
        used: set[str] = set()
        changed = call_index = 0
        rewritten = False
        backward: dict[str, str] = {}  # provider -> canonical, as far as held
    else:
        so_far, held_forward, held_used, call_index, changed, rewritten, backward = held
        forward, used = dict(held_forward), set(held_used)
    known = len(forward)
    walk = messages[done:] if done else messages
    plain = rule.style != "kimi"
    # a transcript whose ids all fit, so far projected to themselves: each new one is its own
    # projection too (what the walk below finds, one id at a time)
    fitting = _as_they_are(walk, pattern, rule.max_len) if plain and not rewritten else None
    if fitting is not None:
        forward.update(zip(fitting, fitting, strict=True))
        used.update(fitting)
        projected = messages
    else:
        projected, rewritten, call_index, changed = _walk(
            messages, walk, so_far, forward, used, rewritten, call_index, changed, target, rule, pattern
        )
    if len(forward) > known:  # the reverse of `forward`, extended by what this turn added to it
        backward = dict(backward)  # a held (and handed out) map never changes
        added = islice(forward, known, None)
        backward.update(zip(islice(forward.values(), known, None), added, strict=True))
    _SO_FAR.hold(messages, context, (projected, forward, used, call_index, changed, rewritten, backward))
    return projected, backward, changed


def _as_they_are(walk: tuple[Message, ...], pattern: re.Pattern[str], max_len: int) -> list[str] | None:
    """The distinct ids of the calls and results of `walk` (user messages aside, as the walk
    leaves them), in order, when each fits as it is and no call carries continuity meta (a
    native id it may go back to); None otherwise. Made at C speed but for one comprehension."""
    ids = [
        (b.id if b.meta is None else None) if type(b) is ToolCall else b.call_id
        for m in walk
        if m.role is not _USER
        for b in m.blocks
        if type(b) is ToolCall or type(b) is ToolResult
    ]
    if None in ids:
        return None
    distinct = list(dict.fromkeys(ids))
    if distinct and not all_fit(distinct, pattern, max_len):
        return None
    return distinct


# a pattern that is one character class repeated, as every format but Kimi's is (`^[...]+$`,
# `^[...]{1,N}$`, `^[...]{N}$`); a class with an escape, a bracket or any other form is not read
# here (`class_run` None: each id is matched alone)
_CLASS_RUN = re.compile(r"\^(\[[^\[\]\\]+\])(?:(\+)|\{([0-9]+)(,[0-9]+)?\})\$")


@lru_cache(maxsize=64)
def class_run(pattern: str) -> tuple[bytes, int, int] | None:
    """For a pattern that is one character class repeated, the ASCII characters the class takes
    (and a line feed, the separator `all_fit` joins ids with, which the class must not take) and
    the least and the most it repeats; None for any other pattern."""
    found = _CLASS_RUN.fullmatch(pattern)
    if found is None:
        return None
    one = re.compile(found[1])
    if one.fullmatch("\n"):
        return None
    taken = bytes(c for c in range(128) if one.fullmatch(chr(c)))
    if found[2]:  # `+`
        return taken + b"\n", 1, sys.maxsize
    least = int(found[3])
    return taken + b"\n", least, int(found[4][1:]) if found[4] else least


def all_fit(ids: list[str], pattern: re.Pattern[str], max_len: int) -> bool:
    """Whether every one of `ids` (not empty) is at most `max_len` long and fully matches
    `pattern`. An ASCII id list checked against a class run is joined by line feeds and its
    characters deleted by `bytes.translate` (a 1,000-message turn's 454 ids: one C pass over
    13 KB where a `fullmatch` a call cost ~0.1 ms); anything else is matched id by id."""
    longest = max(map(len, ids))
    if longest > max_len:
        return False
    run = class_run(pattern.pattern)
    if run is not None:
        joined = "\n".join(ids)
        if joined.isascii():
            taken, least, most = run
            return (
                longest <= most
                and min(map(len, ids)) >= least
                # no id holds the separator: each line is one id
                and joined.count("\n") == len(ids) - 1
                and not joined.encode().translate(None, taken)
            )
    return all(map(pattern.fullmatch, ids))


def _walk(
    messages: tuple[Message, ...],
    walk: tuple[Message, ...],
    so_far: tuple[Message, ...],
    forward: dict[str, str],
    used: set[str],
    rewritten: bool,
    call_index: int,
    changed: int,
    target: Target,
    rule: ToolIdRule,
    pattern: re.Pattern[str],
) -> tuple[tuple[Message, ...], bool, int, int]:
    """The projection one id at a time, from the state held after `so_far` (`forward` and
    `used` are extended in place): the projected messages, whether any changed, the call index
    and the count of ids rewritten."""
    out = list(so_far)

    def fits(candidate: str) -> bool:
        return (
            len(candidate) <= rule.max_len
            and pattern.fullmatch(candidate) is not None
            and candidate not in used
        )

    def assign(canonical: str, name: str | None, native: str | None) -> str:
        nonlocal call_index, changed
        if canonical in forward:
            return forward[canonical]
        if rule.style == "kimi":
            # the index counts every call of the conversation; a result without a call (repair
            # drops those first) takes the next index, so ids stay unique
            pid = _kimi_id(name or "tool", call_index, rule.max_len)
            call_index += 1
            if pid != canonical and pid != native:
                changed += 1
        elif native and fits(native):
            pid = native
        else:
            if fits(canonical):
                pid = canonical
            else:
                salt = 0
                pid = _derive(canonical, rule, salt)
                while not fits(pid):
                    salt += 1
                    pid = _derive(canonical, rule, salt)
            if pid != canonical:
                changed += 1
        forward[canonical] = pid
        used.add(pid)
        return pid

    plain = rule.style != "kimi"
    max_len = rule.max_len
    fullmatch = pattern.fullmatch
    # the walk's names, local: it makes ~10 lookups a message
    user, call_kind, result_kind, keep, lookup = Role.USER, ToolCall, ToolResult, out.append, forward.get
    for message in walk:
        if message.role is user:
            keep(message)
            continue
        blocks: list[Block] | None = None  # a copy only once a block changes
        for j, block in enumerate(message.blocks):
            t = type(block)
            if t is call_kind:
                meta = block.meta
                cid = block.id
                pid = lookup(cid)
                if pid is None:
                    if meta is None and plain and len(cid) <= max_len and cid not in used and fullmatch(cid):
                        # assign()'s outcome for a fitting id without a native one, inline: most calls
                        pid = forward[cid] = cid
                        used.add(cid)
                    else:
                        native = meta.data.get(NATIVE_ID) if meta is not None and target.owns(meta) else None
                        pid = assign(cid, block.name, native if isinstance(native, str) else None)
                if pid == block.id:
                    continue
                new: Block = replace(block, id=pid)
            elif t is result_kind:
                pid = lookup(block.call_id) or assign(block.call_id, None, None)
                if pid == block.call_id:
                    continue
                new = replace(block, call_id=pid)
            else:
                continue
            if blocks is None:
                blocks = list(message.blocks)
            blocks[j] = new
        if blocks is not None:
            rewritten = True
            message = Message(message.role, tuple(blocks))
        keep(message)
    return (tuple(out) if rewritten else messages), rewritten, call_index, changed
