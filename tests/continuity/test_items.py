"""Output items of kept answers by their ids (gateway/continuity/items.py): an answer kept with
its items resolves each item a later request names, for its tenant only, in place and in order;
an unknown, another tenant's or an overlong id is a 400 naming it (bounded), an unreachable store
a 503, and items of the answers a request continues add nothing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gateway.continuity.chain import History
from gateway.continuity.codec import KeptItem, decode_item, encode_item
from gateway.continuity.items import expand
from gateway.continuity.keys import item_key
from gateway.continuity.recorder import Recorder
from gateway.ingress.base import ItemRef
from gateway.ingress.errors import MAX_ECHOED, ClientError
from gateway.store.base import StoreUnavailable
from gateway.store.failopen import FailOpenStore
from gateway.store.memory import MemoryStore
from gateway.transcript.model import Continuity, Message, Reasoning, Role, Text, ToolCall

THOUGHT = Reasoning("Weather, then.", Continuity("anthropic", "key1", "signature", "claude", {"sig": "s1"}))
SAID = Text("Let me look.")
CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
ITEMS = (("rs_a_0", (THOUGHT,)), ("msg_a_1", (SAID,)), ("fc_1", (CALL,)))
QUESTION = Message(Role.USER, (Text("Weather?"),))


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def history(clock: Clock | None = None) -> tuple[History, MemoryStore]:
    clock = clock or Clock()
    memory = MemoryStore(ttl_seconds=3600, max_entries=1000, clock=clock)
    store = FailOpenStore(memory)
    return History(store, Recorder(store), ttl_seconds=3600, max_depth=100, clock=clock), memory


async def keep(kept: History, answer: str = "resp_a", tenant: str = "t") -> None:
    turn = Message(Role.ASSISTANT, (THOUGHT, SAID, CALL))
    await kept.keep(answer, tenant, None, (QUESTION, turn), ITEMS)


def ref(item_id: str, message: int = 1, block: int = 0, n: int = 1) -> ItemRef:
    return ItemRef(item_id, f"input[{n}].id", message, block)


async def test_named_items_come_back_in_place_and_in_order_with_their_continuity():
    kept, _ = history()
    await keep(kept)
    # as the Vercel AI SDK sends them: reasoning and text by reference, the call in full
    refs = (ref("rs_a_0", n=1), ref("msg_a_1", n=2))
    messages = (QUESTION, Message(Role.ASSISTANT, (CALL,)), Message(Role.TOOL, ()))
    found = await kept.items(refs, "t")
    out = expand(messages, refs, found, frozenset())
    assert out[1].blocks == (THOUGHT, SAID, CALL)
    assert out[1].blocks[0].meta == THOUGHT.meta  # replayed to its issuer by the target's rules
    assert out[0] is QUESTION and out[2] is messages[2]


async def test_references_between_full_items_keep_their_order():
    kept, _ = history()
    await keep(kept)
    other = Text("in between")
    refs = (ref("msg_a_1", block=1), ref("fc_1", block=1), ref("rs_a_0", block=2))
    messages = (QUESTION, Message(Role.ASSISTANT, (other, other)))
    out = expand(messages, refs, await kept.items(refs, "t"), frozenset())
    assert out[1].blocks == (other, SAID, CALL, other, THOUGHT)


async def test_a_second_reference_to_one_item_adds_nothing():
    kept, _ = history()
    await keep(kept)
    refs = (ref("rs_a_0", n=1), ref("msg_a_1", n=2), ref("rs_a_0", n=3))
    messages = (QUESTION, Message(Role.ASSISTANT, (CALL,)))
    out = expand(messages, refs, await kept.items(refs, "t"), frozenset())
    assert out[1].blocks == (THOUGHT, SAID, CALL)


async def test_another_tenant_cannot_name_an_item():
    kept, _ = history()
    await keep(kept, tenant="t")
    with pytest.raises(ClientError) as caught:
        await kept.items((ref("msg_a_1", n=3),), "intruder")
    error = caught.value
    assert (error.status, error.code, error.param) == (400, "item_not_found", "input[3].id")
    assert "msg_a_1" in error.message


@pytest.mark.parametrize("item_id", ["msg_unknown_0", "x" * 100_000])
async def test_an_unknown_or_overlong_id_is_a_400_quoting_it_bounded(item_id):
    kept, _ = history()
    await keep(kept)
    with pytest.raises(ClientError) as caught:
        await kept.items((ref("msg_a_1"), ref(item_id, n=2)), "t")
    error = caught.value
    assert (error.status, error.code, error.param) == (400, "item_not_found", "input[2].id")
    assert item_id[:MAX_ECHOED] in error.message and len(error.message) < MAX_ECHOED + 200


async def test_an_unreachable_store_is_a_retryable_503():
    kept, _ = history()

    async def down(keys: Sequence[str]) -> list[bytes | None]:
        raise StoreUnavailable("down")

    kept._lookup = down  # type: ignore[method-assign]
    with pytest.raises(ClientError) as caught:
        await kept.items((ref("msg_a_1"),), "t")
    error = caught.value
    assert (error.status, error.code) == (503, "store_unavailable") and error.headers["Retry-After"]


async def test_items_of_continued_answers_add_nothing_and_an_emptied_turn_goes():
    kept, _ = history()
    await keep(kept)
    refs = (ref("msg_a_1"),)
    messages = (QUESTION, Message(Role.ASSISTANT, ()), Message(Role.USER, (Text("More"),)))
    out = expand(messages, refs, await kept.items(refs, "t"), frozenset({"resp_a"}))
    assert out == (QUESTION, messages[2])


async def test_items_read_after_half_the_ttl_are_written_again():
    clock = Clock()
    kept, memory = history(clock)
    await keep(kept)
    clock.now += 3000  # past half the TTL, within it
    await kept.items((ref("msg_a_1"),), "t")
    await kept._recorder.drain()
    clock.now += 3000  # past the first write's TTL
    again = decode_item((await memory.get_many([item_key("msg_a_1", "t")]))[0])
    assert again == KeptItem("resp_a", 4000.0, (SAID,))
    assert (await memory.get_many([item_key("rs_a_0", "t")]))[0] is None  # not named: it expired


def test_an_item_record_round_trips_and_a_foreign_one_reads_as_a_miss():
    item = KeptItem("resp_a", 12.5, (THOUGHT, SAID, CALL))
    assert decode_item(encode_item(item)) == item
    assert decode_item(b'[99, "resp_a", 1, []]') is None
    assert decode_item(b"not json") is None
    assert decode_item(b'[1, "resp_a", 1, [["o", "c", "x", false, []]]]') is None  # a tool result
