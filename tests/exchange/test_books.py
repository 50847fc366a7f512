"""The held books (gateway/books.py): a finished small request's bookkeeping waits for others (up
to `BATCH` requests or `DELAY` seconds), but whatever reads what it updates (metrics, the
inspector's API, the shutdown) finds every ended request accounted for.
(Every other test runs with `DELAY` 0: tests/conftest.py.)"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from types import SimpleNamespace

import pytest

import gateway.books
from gateway.access_log import ACCESS_LOGGER
from gateway.simulators.base import Reply
from tests.metric_reads import requests_counted
from tests.ops.conftest import USER, access_lines, running_stack
from tests.routing.sim_stack import eventually

LONG = 60.0  # a DELAY no test waits for


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held as requests that end while others are in flight are (these tests send one at a time)."""
    monkeypatch.setattr(gateway.books, "DELAY", LONG)
    monkeypatch.setattr(gateway.books, "HOLD_ALONE", True)


async def test_a_request_that_ends_alone_is_accounted_for_in_the_next_pass(monkeypatch):
    """A lone client's next request would wait behind a whole batch every BATCH requests; one
    that ends while others are in flight is held, and goes with the next lone one."""
    monkeypatch.setattr(gateway.books, "DELAY", LONG)
    accounted: list[str] = []
    _stand_in(monkeypatch, accounted)
    in_flight = ["a", "b"]
    books = gateway.books.Books(in_flight=in_flight)
    books.add(_finished("a"), 1.0, {})
    await asyncio.sleep(0)
    assert accounted == [] and len(books) == 1
    in_flight.remove("a")
    books.add(_finished("b"), 1.0, {})
    await asyncio.sleep(0)
    assert accounted == ["a", "b"] and len(books) == 0


def _stand_in(monkeypatch: pytest.MonkeyPatch, accounted: list[str]) -> None:
    """The bookkeeping replaced by a note of the requests it is given, in order."""

    def account_all(batch, wall):  # type: ignore[no-untyped-def]
        accounted.extend(exchange.request_id for exchange, _, _ in batch)

    monkeypatch.setattr(gateway.books, "account_all", account_all)


def _finished(request_id: str, **fields: object) -> SimpleNamespace:
    """What `Books` reads of a finished exchange, for a stand-in `account_all`."""
    memo = SimpleNamespace(unsettled=lambda: False)
    found = {"offload": None, "raw": b"", "key": "", "trace": None, "state": SimpleNamespace(memo=memo)}
    return SimpleNamespace(request_id=request_id, record=lambda ended: None, **{**found, **fields})


def _counted(stack) -> float:  # type: ignore[no-untyped-def]
    return requests_counted(stack.metrics, "chat_completions", "openai-chat", "openai-chat", "ok")


async def _ask(stack) -> None:  # type: ignore[no-untyped-def]
    stack.hub.states["openai_chat"].push(Reply(text="Forty-two."))
    status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER})
    assert status == 200


async def test_a_small_request_is_held_until_its_metrics_are_read(held, caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        for _ in range(3):
            await _ask(stack)
        await asyncio.sleep(0.01)
        assert len(stack.state.books) == 3 and access_lines(caplog) == []
        # a read of the registry (a scrape, this) accounts for them first
        assert _counted(stack) == 3
        assert len(stack.state.books) == 0 and len(access_lines(caplog)) == 3
        await _ask(stack)
        status, _, body = await stack.get("/metrics")
        assert status == 200 and len(stack.state.books) == 0
        line = next(x for x in body.decode().splitlines() if x.startswith("gateway_requests_total{"))
        assert line.endswith(" 4.0")


async def test_held_requests_are_accounted_for_once_delay_has_passed(monkeypatch, caplog):
    monkeypatch.setattr(gateway.books, "DELAY", 0.05)
    monkeypatch.setattr(gateway.books, "HOLD_ALONE", True)
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        await _ask(stack)
        await _ask(stack)
        assert 1 <= len(stack.state.books) <= 2  # (a loaded machine may have let DELAY pass)
        await eventually(lambda: len(stack.state.books) == 0)
        assert len(access_lines(caplog)) == 2


async def test_a_full_batch_is_accounted_for_in_the_next_pass(held, monkeypatch, caplog):
    monkeypatch.setattr(gateway.books, "BATCH", 3)
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        await _ask(stack)
        await _ask(stack)
        await asyncio.sleep(0.01)
        assert len(stack.state.books) == 2
        await _ask(stack)
        await asyncio.sleep(0)
        assert len(stack.state.books) == 0
        assert [line["status"] for line in access_lines(caplog)] == [200, 200, 200]


async def test_a_large_request_is_accounted_for_at_once_with_those_before(held, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        await _ask(stack)
        await asyncio.sleep(0.01)
        assert len(stack.state.books) == 1
        monkeypatch.setattr(gateway.books, "LARGE_BODY", 10)  # every body is large now
        await _ask(stack)
        await asyncio.sleep(0)
        assert len(stack.state.books) == 0 and len(access_lines(caplog)) == 2


async def test_the_inspector_api_sees_held_requests(held):
    async with running_stack() as stack:
        await _ask(stack)
        await asyncio.sleep(0.01)
        assert len(stack.state.books) == 1
        status, _, body = await stack.get("/inspector/api/requests")
        assert status == 200, body
        assert len(stack.state.books) == 0
        assert len(stack.state.inspector.ring) == 1


async def test_the_shutdown_accounts_for_held_requests(held, caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        await _ask(stack)
        await asyncio.sleep(0.01)
        assert len(stack.state.books) == 1 and access_lines(caplog) == []
    assert len(access_lines(caplog)) == 1


async def test_a_held_request_keeps_the_time_and_duration_of_its_end(held, caplog):
    """Its access line's ts, its record's duration and its capture's are those of its end, not of
    when its bookkeeping ran."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        before = time.time()
        await _ask(stack)
        after = time.time()
        await asyncio.sleep(0.3)
        stack.state.books.settle()
        [line] = access_lines(caplog)
        [capture] = stack.state.inspector.ring.newest(lambda c: True, 1)
        assert line["duration_ms"] < 300 and capture.duration < 0.3
        assert line["duration_ms"] == round(capture.duration * 1000, 1)
        assert before - 0.001 <= capture.time <= after
        assert before - 0.001 <= datetime.fromisoformat(line["ts"]).timestamp() <= after


async def test_a_named_keys_request_is_accounted_for_at_once(held):
    """It is charged (`KeyLimits.spend`) before the key's next request is admitted."""
    from tests.ops.test_keys import ENV, TEAM_A, with_keys

    async with running_stack(with_keys(tokens_per_minute=5), env=ENV) as stack:
        stack.hub.states["openai_chat"].push(Reply(text="Forty-two."))
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 200
        await asyncio.sleep(0)
        assert len(stack.state.books) == 0
        status, _, body = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 429 and b"limited_tokens" in body


async def test_books_that_do_not_hold_account_for_each_request_in_the_next_pass(held, monkeypatch):
    """`gateway serve --workers`: another worker's scrape reads these figures and cannot settle."""
    accounted: list[str] = []
    _stand_in(monkeypatch, accounted)
    for hold, expected in ((True, []), (False, ["a"])):
        books = gateway.books.Books(hold=hold)
        exchange = _finished("a")
        books.add(exchange, 1.0, {})
        await asyncio.sleep(0)
        assert accounted == expected and len(books) == (1 if hold else 0)
        books.settle()
        accounted.clear()


async def test_a_traced_request_is_accounted_for_at_once(held, monkeypatch):
    """Its span ends when its bookkeeping runs (tracing's `finish`)."""
    accounted: list[str] = []
    _stand_in(monkeypatch, accounted)
    books = gateway.books.Books()
    plain, traced = _finished("a"), _finished("b", trace=object())
    books.add(plain, 1.0, {})
    await asyncio.sleep(0)
    assert accounted == []
    books.add(traced, 1.0, {})
    await asyncio.sleep(0)
    assert accounted == ["a", "b"]


async def test_a_request_whose_body_the_memo_waits_to_bound_is_accounted_for_at_once(held, monkeypatch):
    """`DecodeMemo.settle` bounds it then, not the next request on its way upstream."""
    accounted: list[str] = []
    _stand_in(monkeypatch, accounted)
    books = gateway.books.Books()
    waiting = SimpleNamespace(memo=SimpleNamespace(unsettled=lambda: True))
    books.add(_finished("a", state=waiting), 1.0, {})
    await asyncio.sleep(0)
    assert accounted == ["a"]


async def test_a_large_bodys_parse_is_freed_by_its_bookkeeping_not_on_the_answers_way(monkeypatch):
    """Freeing a 1,000-message body's parse takes ~0.2-0.4 ms: the exchange holds it until its
    bookkeeping (after the answer's write) for a body the books settle at once; a smaller one's
    bookkeeping may be held, and its parse with it: it goes as the request ends."""
    added: list[object] = []
    add = gateway.books.Books.add

    def noted(books, exchange, ended, headers):  # type: ignore[no-untyped-def]
        added.append(exchange.parsed)
        add(books, exchange, ended, headers)

    monkeypatch.setattr(gateway.books.Books, "add", noted)
    long = [{"role": "user", "content": "x" * gateway.books.LARGE_BODY}]
    async with running_stack() as stack:
        for messages in (long, USER * 40):
            stack.hub.states["openai_chat"].push(Reply(text="Forty-two."))
            status, _, _ = await stack.chat({"model": "openai-chat", "messages": messages})
            assert status == 200
    large, small = added
    assert type(large) is dict and len(large["messages"]) == 1  # the body as parsed
    assert small is None
