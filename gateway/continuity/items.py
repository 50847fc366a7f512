"""Output items of kept answers, by the ids their clients got.

A client that keeps its conversation as items (the Vercel AI SDK's default `openai(model)`, with
`store: true`) sends an earlier answer's items back as references (`item_reference`: the id
alone) instead of the items. Each item of an answer kept under its id is therefore kept too, under
its own id (`item_key`), as the answer's id and the canonical blocks the item was made of, with
their continuity: an id of any form resolves, the gateway's own (`msg_<answer>_<n>`) and a
provider's (OpenAI's `rs_...`) alike, in one batched lookup without walking a chain.

Resolving puts each reference's blocks in its place in its assistant message, in request order;
the continuity they carry replays to its issuer only, as every block's does. A reference to an
item of the answers the request already continues (`previous_response_id`) adds nothing: the
continued history holds that item in its place already.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

from gateway.continuity.codec import KeptItem, decode_item
from gateway.continuity.keys import item_key
from gateway.ingress.base import ItemRef
from gateway.ingress.errors import ClientError, echo
from gateway.transcript.model import Block, Message, replace

# longer than any id the gateway or a provider issues: such a reference is not looked up
MAX_ITEM_ID = 256

Lookup = Callable[[Sequence[str]], Awaitable[list[bytes | None]]]
Found = dict[str, KeptItem]  # by item id


async def resolve_items(lookup: Lookup, refs: Sequence[ItemRef], tenant: str) -> Found:
    """The kept item each reference names (one lookup for all), or the client's error: 400
    `item_not_found` for the first that names nothing this tenant keeps. `lookup` raises
    StoreUnavailable for a store that failed (not for a miss): the caller's 503."""
    ids = list(dict.fromkeys(r.id for r in refs if len(r.id) <= MAX_ITEM_ID))
    raws = await lookup([item_key(i, tenant) for i in ids]) if ids else []
    found: Found = {}
    for item_id, raw in zip(ids, raws, strict=True):
        item = decode_item(raw) if raw is not None else None
        if item is not None:
            found[item_id] = item
    for ref in refs:
        if ref.id not in found:
            raise ClientError(
                400,
                f"{ref.param}: no item {echo(ref.id)!r} is kept here (unknown, of a response created"
                " with store: false, or older than the store's ttl_seconds)",
                param=ref.param,
                code="item_not_found",
            )
    return found


def expand(
    messages: tuple[Message, ...], refs: Iterable[ItemRef], found: Found, continued: frozenset[str]
) -> tuple[Message, ...]:
    """`messages` with each reference's blocks in its place (`ItemRef.message`, `.block`), in
    request order; references to items of the `continued` answers add nothing, nor does a second
    reference to one item (OpenAI refuses it as a duplicate; its blocks once are what was meant).
    An assistant message left empty (it named only such items) is dropped."""
    emptied: set[int] = set()
    placed: set[str] = set()
    by_message: dict[int, list[ItemRef]] = {}
    for ref in refs:
        by_message.setdefault(ref.message, []).append(ref)
    out = list(messages)
    for index, named in by_message.items():
        message = messages[index]
        blocks: list[Block] = []
        at = 0
        for ref in named:  # in request order: their block positions never decrease
            blocks.extend(message.blocks[at : ref.block])
            at = max(at, ref.block)
            item = found[ref.id]
            if item.answer not in continued and ref.id not in placed:
                placed.add(ref.id)
                blocks.extend(item.blocks)
        blocks.extend(message.blocks[at:])
        out[index] = replace(message, blocks=tuple(blocks))
        if not blocks:
            emptied.add(index)
    if not emptied:
        return tuple(out)
    return tuple(m for n, m in enumerate(out) if n not in emptied)
