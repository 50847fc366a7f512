"""Kept conversations as chains (gateway/continuity/chain.py): a link holds only what its request
added, a chain reads back whole in batches, a missing or corrupt link is a clear 400, an
unreachable store a 503, and links older than half the TTL are handed back to be written again."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pytest

from gateway.continuity import chain
from gateway.continuity.codec import Link, decode_link, encode_link, encode_transcript
from gateway.continuity.keys import history_key
from gateway.ingress.base import HistoryRef
from gateway.ingress.errors import ClientError
from gateway.store.base import StoreUnavailable
from gateway.transcript.model import Message, Role, Text


def said(role: Role, text: str) -> Message:
    return Message(role, (Text(text),))


class Kept:
    """A store of links, counting the lookups."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}
        self.lookups = 0
        self.down = False

    async def lookup(self, keys: Sequence[str]) -> list[bytes | None]:
        if self.down:
            raise StoreUnavailable("down")
        self.lookups += 1
        return [self.records.get(k) for k in keys]

    def build(self, turns: int, tenant: str = "t", written: float = 1000.0) -> str:
        """A chain of `turns` answers; the last one's id."""
        ancestors: tuple[str, ...] = ()
        for n in range(turns):
            link = Link(n, written, ancestors, (said(Role.USER, f"q{n}"), said(Role.ASSISTANT, f"a{n}")))
            answer = f"resp_{n}"
            self.records[history_key(answer, tenant)] = encode_link(link)
            ancestors = (answer, *ancestors)[: chain.ANCESTORS]
        return f"resp_{turns - 1}"


async def resolve(kept: Kept, answer: str, **options: float) -> chain.Kept:
    return await chain.resolve(
        kept.lookup,
        chain.LinkCache(0),
        HistoryRef("previous_response_id", answer, "previous_response_not_found"),
        "t",
        max_depth=int(options.get("max_depth", 10_000)),
        refresh_before=options.get("refresh_before", 0.0),
    )


async def test_a_chain_reads_back_whole_in_order_in_batches() -> None:
    kept = Kept()
    tip = kept.build(100)
    resolved = await resolve(kept, tip)
    assert [b.text for m in resolved.messages for b in m.blocks] == [
        text for n in range(100) for text in (f"q{n}", f"a{n}")
    ]
    assert resolved.depth == 99 and resolved.ancestors[0] == tip
    assert kept.lookups == 1 + -(-99 // chain.ANCESTORS)  # the tip, then a batch per 16 ancestors
    assert resolved.stale == ()


async def test_a_link_holds_only_what_its_request_added() -> None:
    kept = Kept()
    kept.build(200)
    sizes = [len(kept.records[history_key(f"resp_{n}", "t")]) for n in (20, 199)]
    assert sizes[1] - sizes[0] < 40  # a few more digits in its ids: not the 180 turns between them


async def test_a_missing_ancestor_is_a_clear_400() -> None:
    kept = Kept()
    tip = kept.build(40)
    del kept.records[history_key("resp_3", "t")]
    with pytest.raises(ClientError) as caught:
        await resolve(kept, tip)
    assert caught.value.status == 400 and caught.value.code == "previous_response_not_found"
    assert "earlier answer" in caught.value.message


async def test_a_link_whose_depth_does_not_follow_is_refused_not_followed_forever() -> None:
    kept = Kept()
    loop = Link(5, 1000.0, ("resp_x",), (said(Role.USER, "q"),))
    kept.records[history_key("resp_x", "t")] = encode_link(loop)  # its own ancestor
    with pytest.raises(ClientError):
        await resolve(kept, "resp_x")


async def test_the_depth_limit_counts_the_answer_to_come() -> None:
    kept = Kept()
    tip = kept.build(3)
    await resolve(kept, tip, max_depth=4)
    with pytest.raises(ClientError) as caught:
        await resolve(kept, tip, max_depth=3)
    assert caught.value.code == "previous_response_chain_too_deep"


async def test_a_store_that_cannot_answer_is_a_retryable_503() -> None:
    kept = Kept()
    kept.down = True
    with pytest.raises(ClientError) as caught:
        await resolve(kept, "resp_1")
    assert caught.value.status == 503 and caught.value.code == "store_unavailable"
    assert caught.value.headers["Retry-After"] == "1"


async def test_links_older_than_the_refresh_time_are_handed_back() -> None:
    kept = Kept()
    tip = kept.build(5, written=1000.0)
    newer = Link(5, 5000.0, (tip, "resp_3", "resp_2", "resp_1", "resp_0"), (said(Role.USER, "q5"),))
    kept.records[history_key("resp_5", "t")] = encode_link(newer)
    resolved = await resolve(kept, "resp_5", refresh_before=2000.0)
    assert [answer for answer, _ in resolved.stale] == [tip, "resp_3", "resp_2", "resp_1", "resp_0"]


async def test_the_cache_answers_what_this_process_wrote() -> None:
    kept = Kept()
    tip = kept.build(50)
    cache = chain.LinkCache(1 << 20)
    ref = HistoryRef("previous_response_id", tip, "previous_response_not_found")
    first = await chain.resolve(kept.lookup, cache, ref, "t", max_depth=100, refresh_before=0.0)
    kept.down = True  # every link is cached now
    again = await chain.resolve(kept.lookup, cache, ref, "t", max_depth=100, refresh_before=0.0)
    assert again.messages == first.messages


def test_a_record_of_the_previous_format_reads_as_a_root() -> None:
    messages = (said(Role.USER, "hi"), said(Role.ASSISTANT, "hello"))
    link = decode_link(encode_transcript(messages))
    assert link is not None and link.depth == 0 and link.ancestors == () and link.messages == messages


@pytest.mark.parametrize(
    "record",
    [
        [2, -1, 0.0, [], []],
        [2, 1, 0.0, [], []],  # a depth without ancestors
        [2, 0, 0.0, [5], []],
        [3, 0, 0.0, [], []],
        [2, 0, 0.0, [], [["nobody", []]]],
    ],
)
def test_a_malformed_record_is_not_a_link(record: list[object]) -> None:
    assert decode_link(orjson.dumps(record)) is None
