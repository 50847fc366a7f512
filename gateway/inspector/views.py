"""The inspector's JSON views of a capture, built when the API asks (never on the request path):
a summary for the list, and the whole request - client request, attempts with what each sent,
repairs, continuity, answer, and the client and provider transcripts side by side.

The side-by-side view aligns the two canonical transcripts block by block: a client block with no
counterpart was dropped, a provider block with none was inserted (a synthetic tool result, a
placeholder), a matched tool id that differs was projected to the provider's format, and a
matched block that carries continuity the client's did not has had it restored.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping
from difflib import SequenceMatcher
from typing import Any

import orjson

from gateway.inspector.capture import Capture
from gateway.repair.report import Repair
from gateway.routing.answer import Attempt
from gateway.transcript.model import (
    AssistantTurn,
    Block,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)

PREVIEW_TEXT = 400  # characters of a block's text shown in a transcript row

DROPPED, INSERTED, PROJECTED, RESTORED = "dropped", "inserted", "projected", "restored"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _tokens(capture: Capture) -> dict[str, int] | None:
    usage = capture.usage
    if usage is None:
        return None
    return {
        "input": usage.input_tokens,
        "output": usage.output_tokens,
        "cache_read": usage.cache_read_tokens,
        "cache_write": usage.cache_write_tokens,
        "reasoning": usage.reasoning_tokens,
    }


def summary(capture: Capture) -> dict[str, Any]:
    return {
        "id": capture.id,
        "time": datetime.datetime.fromtimestamp(capture.time, datetime.UTC).isoformat(
            timespec="milliseconds"
        ),
        "ingress": capture.ingress,
        "session": capture.session,
        "model": capture.model,
        "provider": capture.provider,
        "upstream_model": capture.upstream_model,
        "status": capture.status,
        "outcome": capture.outcome,
        "repairs": capture.repair_counts(),
        "attempts": len(capture.attempts),
        "duration_ms": _ms(capture.duration),
        "ttft_ms": _ms(capture.ttft),
        "tokens": _tokens(capture),
    }


def _json_or_text(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def sent_view(body: bytes) -> dict[str, Any]:
    """A body sent upstream, and the digest of its exact bytes."""
    if not body:
        return {"upstream_request": None, "sha256": None}
    return {"upstream_request": _json_or_text(body), "sha256": hashlib.sha256(body).hexdigest()}


def _repair(repair: Repair, target: str = "") -> dict[str, str]:
    out = {"kind": repair.kind, "detail": repair.detail}
    if target:
        out["target"] = target
    return out


def _attempt(attempt: Attempt, started: float) -> dict[str, Any]:
    error = attempt.error
    out: dict[str, Any] = {
        "provider": attempt.provider,
        "model": attempt.model,
        "outcome": attempt.outcome,
        "status": 200 if error is None else error.status,
        "error": None
        if error is None
        else {"message": error.message, "type": error.type, "code": error.code},
        "started_ms": _ms(attempt.started - started) if attempt.started else None,
        "elapsed_ms": _ms(attempt.elapsed),
        "url": attempt.url,
        # what the provider received (headers, with the provider key, are never kept); null:
        # nothing was sent (the request could not be encoded for it)
        **sent_view(attempt.sent),
        "repairs": [_repair(r) for r in attempt.prepared.repairs] if attempt.prepared is not None else [],
    }
    return out


def block_view(block: Block) -> dict[str, Any]:
    t = type(block)
    if t is Text:
        return {"kind": "refusal" if block.refusal else "text", "text": block.text[:PREVIEW_TEXT]}
    if t is Reasoning:
        return {"kind": "reasoning", "text": block.text[:PREVIEW_TEXT]}
    if t is ToolCall:
        return {
            "kind": "tool_call",
            "id": block.id,
            "name": block.name,
            "text": block.arguments[:PREVIEW_TEXT],
        }
    if t is ToolResult:
        return {"kind": "tool_result", "id": block.call_id, "text": block.content[:PREVIEW_TEXT]}
    if t is Image:
        return {"kind": "image", "text": block.url[:80]}
    if t is Document:
        return {"kind": "document", "text": f"{block.media_type} {block.title or ''}".strip()}
    raise TypeError(f"unknown block {t.__name__}")


def _continuity(meta: Continuity | None) -> dict[str, Any] | None:
    if meta is None:
        return None
    return {"provider": meta.provider, "kind": meta.kind, "model": meta.model, "data": sorted(meta.data)}


def _key(block: Block, canonical: Mapping[str, str]) -> tuple[str, str]:
    """What makes two blocks of the two transcripts the same block."""
    t = type(block)
    if t is Text:
        return ("text", block.text)
    if t is Reasoning:
        return ("reasoning", block.text)
    if t is ToolCall:
        return ("call", canonical.get(block.id, block.id))
    if t is ToolResult:
        return ("result", canonical.get(block.call_id, block.call_id))
    if t is Image:
        return ("image", block.url)
    if t is Document:
        return ("document", block.source)
    raise TypeError(f"unknown block {t.__name__}")


def _rows(messages: tuple[Message, ...]) -> list[tuple[int, Message, Block]]:
    return [(i, m, b) for i, m in enumerate(messages) for b in m.blocks]


def _metas(messages: tuple[Message, ...]) -> set[int]:
    return {id(meta) for m in messages for b in m.blocks if (meta := getattr(b, "meta", None)) is not None}


def _row(index: int, message: Message, block: Block, mark: str = "", note: str = "") -> dict[str, Any]:
    row = {"message": index, "role": message.role.value, **block_view(block), "mark": mark}
    meta = getattr(block, "meta", None)
    if meta is not None:
        row["continuity"] = meta.kind
    if note:
        row["note"] = note
    return row


def transcript_diff(
    client: tuple[Message, ...],
    provider: tuple[Message, ...],
    provider_ids: Mapping[str, str],
    routed: tuple[Message, ...] = (),
) -> dict[str, list[Any]]:
    """The two transcripts as rows, each row marked with what repair did to it (see the module
    docstring), and `pairs`: the rows side by side in reading order (indexes into each list, null
    where one side has none); `provider_ids`: the provider's tool ids -> the client's; `routed`:
    the client's transcript with recorded continuity restored (continuity found there and not in
    the client's is restored, any other the provider got was made for it)."""
    left, right = _rows(client), _rows(provider)
    restored = _metas(routed) - _metas(client)
    left_keys = [_key(b, {}) for _, _, b in left]
    right_keys = [_key(b, provider_ids) for _, _, b in right]
    out_left: list[dict[str, Any]] = []
    out_right: list[dict[str, Any]] = []
    pairs: list[list[int | None]] = []  # [client row, provider row] in reading order
    matcher = SequenceMatcher(None, left_keys, right_keys, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for (li, lm, lb), (ri, rm, rb) in zip(left[i1:i2], right[j1:j2], strict=True):
                mark, note = "", ""
                native = getattr(rb, "id", None) or getattr(rb, "call_id", None)
                canonical = getattr(lb, "id", None) or getattr(lb, "call_id", None)
                meta = getattr(rb, "meta", None)
                if meta is not None and getattr(lb, "meta", None) != meta:
                    if id(meta) in restored:
                        mark, note = RESTORED, f"{meta.kind} continuity restored from the record"
                    else:  # made for the target (a placeholder signature, filled-in reasoning)
                        mark, note = INSERTED, f"{meta.kind} continuity filled in"
                if native is not None and native != canonical:  # the id is what a reader checks first
                    mark, note = PROJECTED, "; ".join(x for x in (f"{canonical} -> {native}", note) if x)
                pairs.append([len(out_left), len(out_right)])
                out_left.append(_row(li, lm, lb, mark, note))
                out_right.append(_row(ri, rm, rb, mark, note))
            continue
        for li, lm, lb in left[i1:i2]:
            pairs.append([len(out_left), None])
            out_left.append(_row(li, lm, lb, DROPPED))
        for ri, rm, rb in right[j1:j2]:
            pairs.append([None, len(out_right)])
            out_right.append(_row(ri, rm, rb, INSERTED))
    return {"client": out_left, "provider": out_right, "pairs": pairs}


def continuity_view(capture: Capture) -> dict[str, Any]:
    """Which continuity tokens reached the request: echoed by the client (its history carried
    them), and restored from the gateway's record of earlier turns (store)."""
    echoed: list[dict[str, Any]] = []
    received, routed = capture.received, capture.routed
    if received is not None:
        for index, message in enumerate(received.messages):
            for block in message.blocks:
                meta = getattr(block, "meta", None)
                if meta is not None:
                    echoed.append({"message": index, "block": block_view(block)["kind"], **_continuity(meta)})
    restored: list[dict[str, Any]] = []
    if received is not None and routed is not None and received is not routed:
        for index, (before, after) in enumerate(zip(received.messages, routed.messages, strict=False)):
            if before is after:
                continue
            was = {_key(b, {}): getattr(b, "meta", None) for b in before.blocks}
            for block in after.blocks:
                meta = getattr(block, "meta", None)
                if meta is not None and was.get(_key(block, {})) != meta:
                    restored.append(
                        {"message": index, "block": block_view(block)["kind"], **_continuity(meta)}
                    )
    return {
        "echoed": echoed,
        "restored": restored,
        "repairs": [_repair(r) for r in capture.restored],
        "ignored_tokens": capture.ignored_tokens,
    }


def answer_view(turn: AssistantTurn | None, error: str) -> dict[str, Any] | None:
    if turn is None:
        return {"error": error} if error else None
    return {
        "blocks": [block_view(b) for b in turn.blocks],
        "stop_reason": turn.stop_reason.value,
        "error": error or None,
    }


def _provider_side(capture: Capture) -> Attempt | None:
    """The attempt whose transcript is shown against the client's: the one that served, else the
    last that prepared one."""
    for attempt in reversed(capture.attempts):
        if attempt.prepared is not None:
            return attempt
    return None


def detail(capture: Capture) -> dict[str, Any]:
    out = summary(capture)
    out["tenant_scoped"] = bool(capture.tenant)
    out["affinity_break"] = capture.affinity_break
    out["client_request"] = {
        "headers": dict(capture.headers),
        "body": _json_or_text(capture.raw) if capture.raw else None,
    }
    out["attempts"] = [_attempt(a, capture.started) for a in capture.attempts]
    target = capture.provider
    out["repairs"] = [_repair(r, "") for r in capture.restored] + [
        _repair(r, target) for r in capture.repairs
    ]
    out["continuity"] = continuity_view(capture)
    out["response"] = answer_view(capture.turn, capture.error)
    shown = _provider_side(capture)
    client = capture.received.messages if capture.received is not None else ()
    if shown is not None and shown.prepared is not None:
        routed = capture.routed.messages if capture.routed is not None else ()
        prepared = shown.prepared
        out["transcript"] = {
            "provider_name": shown.provider,
            **transcript_diff(client, prepared.request.messages, prepared.provider_ids, routed),
        }
    else:
        out["transcript"] = {"provider_name": None, **transcript_diff(client, (), {})}
    return out
