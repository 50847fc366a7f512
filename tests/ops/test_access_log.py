"""The access log: exactly one JSON line per request on "gateway.access", with the fields an
operator needs and nothing a client sent verbatim; levels and formats from configure_logging."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from gateway.access_log import ACCESS_LOGGER, access_line, configure_logging, log_access, session_hash
from gateway.metrics import AttemptOutcome, RequestRecord
from gateway.redaction import Redactor
from gateway.repair.report import Repair
from gateway.simulators.base import Fault, Reply
from gateway.transcript.model import Usage
from tests.ops.conftest import USER, access_lines, running_stack


def test_a_record_becomes_one_line_with_hashed_session_counts_and_usage():
    record = RequestRecord(
        "chat_completions",
        request_id="r1",
        session="user-alice@example",
        model="smart",
        provider="gemini",
        outcome="ok",
        status=200,
        duration=1.23456,
        ttft=0.25,
        upstream_model="gemini-3-pro-preview",
        attempts=[AttemptOutcome("claude", "overloaded"), AttemptOutcome("gemini", "ok")],
        repairs=[("gemini", Repair("synthetic_tool_result")), ("gemini", Repair("synthetic_tool_result"))],
        usage=Usage(100, 20, 50, 0, 7),
    )
    line = access_line(record)
    assert line == {
        "request_id": "r1",
        "ingress": "chat_completions",
        "session": session_hash("user-alice@example"),
        "model": "smart",
        "provider": "gemini",
        "upstream_model": "gemini-3-pro-preview",
        "status": 200,
        "outcome": "ok",
        "attempts": 2,
        "tried": [{"provider": "claude", "outcome": "overloaded"}, {"provider": "gemini", "outcome": "ok"}],
        "repairs": {"synthetic_tool_result": 2},
        "duration_ms": 1234.6,
        "ttft_ms": 250.0,
        "usage": {"input": 100, "output": 20, "cache_read": 50, "cache_write": 0, "reasoning": 7},
        "cost_usd": None,
        "ignored_tokens": 0,
    }
    assert len(line["session"]) == 16 and "alice" not in orjson.dumps(line).decode()
    assert session_hash("user-alice@example") != session_hash("user-bob@example")


async def test_every_request_gets_exactly_one_line(caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        stack.hub.states["anthropic"].push(Fault(status=529))
        stack.hub.states["gemini"].push(Reply(text="Forty-two."))
        status, headers, _ = await stack.chat(
            {"model": "smart", "messages": USER}, headers={"X-Session-Id": "alice-laptop-1"}
        )
        assert status == 200
        stack.hub.states["openai_chat"].push(Reply(text="Forty-two."))
        status, _, _ = await stack.chat(
            {
                "model": "openai-chat",
                "messages": USER,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        )
        assert status == 200
        status, _, _ = await stack.chat({"model": "nope", "messages": USER})
        assert status == 404
        status, _, _ = await stack.chat({"model": "claude", "messages": "not a list"})
        assert status == 400
        lines = access_lines(caplog)

    assert len(lines) == 4
    assert len({line["request_id"] for line in lines}) == 4
    failover, streamed, unknown, invalid = lines
    assert failover["model"] == "smart" and failover["provider"] == "gemini"
    assert failover["tried"] == [
        {"provider": "claude", "outcome": "overloaded"},
        {"provider": "gemini", "outcome": "ok"},
    ]
    assert failover["attempts"] == 2 and failover["outcome"] == "ok"
    assert failover["session"] == session_hash("alice-laptop-1")
    assert failover["usage"]["input"] > 0 and failover["usage"]["output"] > 0
    assert failover["duration_ms"] >= failover["ttft_ms"] > 0
    assert streamed["provider"] == "openai-chat" and streamed["usage"]["output"] > 0
    assert unknown["model"] == "unknown" and unknown["outcome"] == "client_error"
    assert unknown["provider"] == "none" and unknown["tried"] == []
    assert invalid["outcome"] == "client_error"
    assert all(set(line) >= {"ts", "status", "duration_ms", "repairs", "usage"} for line in lines)
    # the client's own strings (session id, model name asked for) are never written verbatim
    assert "alice-laptop-1" not in caplog.text and '"nope"' not in caplog.text


async def test_requests_refused_before_the_handler_are_logged_and_counted(caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    def limits(config):
        config["auth"] = {"tokens_env": ["OPS_TOKEN"]}
        config["server"]["max_body_bytes"] = 4096

    async with running_stack(limits, env={"OPS_TOKEN": "ops-token-0123456789"}) as stack:
        status, _, _ = await stack.chat({"model": "claude", "messages": USER})
        assert status == 401
        auth = {"Authorization": "Bearer ops-token-0123456789"}
        status, _, _ = await stack.chat(
            {"model": "claude", "messages": USER, "pad": "x" * 5000}, headers=auth
        )
        assert status == 413
        lines = access_lines(caplog)
        requests = stack.metrics.registry.get_sample_value(
            "gateway_requests_total",
            {
                "ingress": "chat_completions",
                "model": "unknown",
                "provider": "none",
                "outcome": "client_error",
            },
        )
        assert requests == 2

    assert [(line["status"], line["outcome"], line["model"]) for line in lines] == [
        (401, "client_error", "unknown"),
        (413, "client_error", "unknown"),
    ]


def test_configure_logging_writes_bare_json_lines_at_the_configured_level(restore_logging):
    out = io.StringIO()
    configure_logging("warning", Redactor(["provider-key-0123456789"]), out)
    log_access(RequestRecord("chat_completions", request_id="quiet"))
    logging.getLogger("gateway.test").info("an info line")
    logging.getLogger("gateway.test").warning("a warning with provider-key-0123456789 in it")
    text = out.getvalue()
    assert "quiet" not in text and "an info line" not in text  # below the level
    assert "a warning with [redacted] in it" in text and "provider-key-0123456789" not in text

    out = io.StringIO()
    configure_logging("debug", Redactor(), out)
    log_access(RequestRecord("chat_completions", request_id="loud", status=200))
    logging.getLogger("gateway.test").debug("a debug line")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    access = orjson.loads(lines[0])  # exactly one JSON object, nothing around it
    assert access["request_id"] == "loud" and access["status"] == 200 and access["ts"].endswith("+00:00")
    assert lines[1].endswith("DEBUG gateway.test a debug line")


def test_configure_logging_rejects_an_unknown_level(restore_logging):
    with pytest.raises(ValueError, match="verbose"):
        configure_logging("verbose", Redactor(), io.StringIO())


async def test_a_whole_answer_is_written_before_its_bookkeeping(caplog, monkeypatch):
    """Metrics, the access line and the inspector's capture come once the answer is on its way
    (off the client's latency), and before the client can see it complete."""
    import gateway.books

    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    account_all = gateway.books.account_all
    written: list[int] = []

    def accounted(batch, wall):
        # the answer's bytes written so far
        written.extend(exchange.http.writer.output_size for exchange, _, _ in batch)
        account_all(batch, wall)

    monkeypatch.setattr(gateway.books, "account_all", accounted)
    async with running_stack() as stack:
        stack.hub.states["openai_chat"].push(Reply(text="Forty-two."))
        status, _, body = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200
        # the client has the answer: its line is there already
        assert len(access_lines(caplog)) == 1
    assert written and written[0] >= len(body)


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_lines_held_are_the_same_lines_flushed_once_at_the_end(restore_logging):
    from gateway.access_log import lines_held

    records = [RequestRecord("chat_completions", request_id=f"r{n}", status=200) for n in range(3)]
    one_by_one = _CountingStream()
    configure_logging("info", Redactor(), one_by_one)
    for record in records:
        log_access(record)
    assert one_by_one.flushes == 3
    held = _CountingStream()
    configure_logging("info", Redactor(), held)
    with lines_held():
        for record in records:
            log_access(record)
        assert held.flushes == 0
        with lines_held():  # nested: the outer scope's end flushes
            log_access(records[0])
        assert held.flushes == 0
    assert held.flushes == 1
    lines = held.getvalue().splitlines()
    expected = one_by_one.getvalue().splitlines() + one_by_one.getvalue().splitlines()[:1]
    assert [orjson.loads(line)["request_id"] for line in lines] == ["r0", "r1", "r2", "r0"]
    assert [{**orjson.loads(a), "ts": ""} for a in lines] == [{**orjson.loads(b), "ts": ""} for b in expected]
    log_access(records[1])  # outside the scope: flushed at once again
    assert held.flushes == 2


class _CountingRaw(io.RawIOBase):
    """What a line-buffered text stream (stderr) hands to the OS: one `write` per system call."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        self.writes.append(bytes(data))
        return len(data)


def test_lines_held_reach_a_line_buffered_stream_in_one_write(restore_logging):
    from gateway.access_log import lines_held

    records = [RequestRecord("chat_completions", request_id=f"r{n}", status=200) for n in range(3)]
    raw = _CountingRaw()
    stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", line_buffering=True)
    configure_logging("info", Redactor(), stream)
    log_access(records[0])  # alone: written (and flushed) at once
    assert len(raw.writes) == 1
    with lines_held():
        for record in records:
            log_access(record)
        assert len(raw.writes) == 1  # held, even by a stream that flushes at every newline
    assert len(raw.writes) == 2
    lines = b"".join(raw.writes).decode().splitlines()
    assert [orjson.loads(line)["request_id"] for line in lines] == ["r0", "r0", "r1", "r2"]
    assert raw.writes[1].decode().splitlines() == lines[1:]


async def test_requests_ending_in_one_step_are_accounted_together_in_order(caplog):
    """One call for the requests that ended since the last: each accounted for as before, in the
    order they ended, step by step over them; one whose step fails is reported and left out of the
    steps after it, and the others still are accounted for."""
    import asyncio
    from types import SimpleNamespace

    import gateway.books
    import gateway.exchange

    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    captured: list[str] = []
    counted: list[str] = []
    settled: list[int] = []

    def state(broken: str = "") -> SimpleNamespace:
        def price(record: RequestRecord) -> None:
            if broken == "pricing":
                raise RuntimeError("broken pricing")
            record.cost_usd = 0.25

        return SimpleNamespace(
            price=price,
            count=lambda record: counted.append(record.request_id),
            inspector=SimpleNamespace(capture=lambda exchange, *rest: captured.append(exchange.request_id)),
            memo=SimpleNamespace(settle=lambda: settled.append(1), unsettled=lambda: False),
        )

    def record_of(request_id: str):  # type: ignore[no-untyped-def]
        def record(ended: float) -> RequestRecord:
            if request_id == "d":
                raise RuntimeError("broken record")
            return RequestRecord("chat_completions", request_id=request_id, status=200, duration=0.5)

        return record

    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda loop, context: reported.append(context))
    try:
        books = gateway.books.Books()
        exchanges = []
        for request_id in "abcd":
            exchange = SimpleNamespace(
                request_id=request_id,
                record=record_of(request_id),
                offload=None,
                raw=b"",
                key="",
                trace=None,
                cost_usd=None,
                state=state("pricing" if request_id == "b" else ""),
            )
            exchanges.append(exchange)
            books.add(exchange, 1.5, {})
        books.settle()
        assert len(books) == 0
        assert sorted(str(c["exception"]) for c in reported) == ["broken pricing", "broken record"]
        assert counted == captured == ["a", "c"] and settled == [1]
        assert [line["request_id"] for line in access_lines(caplog)] == ["a", "c"]
        assert [e.cost_usd for e in exchanges] == [0.25, None, 0.25, None]
        caplog.clear()
        reported.clear()
        # through the exchange: every request is accounted for once its answer is out
        async with running_stack() as stack:
            for _ in range(3):
                status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER})
                assert status == 200
            await asyncio.sleep(0)
            assert len(stack.state.books) == 0 and not reported
            assert len({line["request_id"] for line in access_lines(caplog)}) == 3
            assert len(stack.state.inspector.ring) == 3
    finally:
        loop.set_exception_handler(None)
