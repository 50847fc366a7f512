"""Answering the client once the commit point is passed: the whole answer folded from the
upstream's events, or the stream relayed event by event in the client's dialect (or NDJSON;
the relay itself in gateway/stream_relay.py), and the answered turn recorded before the client
sees its end (gateway/exchange.py runs the steps before this).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import weakref
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.continuity.recorder import carries_continuity
from gateway.ingress.base import Inbound, StreamEncoder
from gateway.ingress.errors import ClientError
from gateway.ingress.ndjson import NdjsonEncoder, accepts_ndjson
from gateway.ingress.textual import ServerToolsAsText
from gateway.routing.engine import Answer
from gateway.stream_relay import FORMAT_ERRORS, Relay
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.transcript.model import AssistantTurn, Request, replace
from gateway.transcript.reasoning import ReasoningFilter, visible_blocks

if TYPE_CHECKING:
    from gateway.exchange import Exchange

log = logging.getLogger("gateway")


async def record_turn(exchange: Exchange, inbound: Inbound, request: Request, turn: AssistantTurn) -> None:
    """Record the answered turn before the client sees its end (a client may send its next turn
    the moment it has the last byte, on another connection)."""
    state, tenant = exchange.state, exchange.tenant
    # awaited: in this process a write in flight is read from `pending`, but another replica or
    # worker sharing the store reads the store itself (a store only this process reads is not
    # waited for: `Recorder.local`). A turn with nothing to record (plain text from a family
    # that issues no continuity) is not placed in its conversation either
    if carries_continuity(turn.blocks):
        recorder = state.recorder
        position = exchange.assistants  # the answer's place among the conversation's assistant turns
        written = recorder.record(turn.blocks, exchange.session, position, tenant, not recorder.local)
        if written is not None:
            await written
    if inbound.keep:  # awaited: the client may continue it the moment it has the answer's end
        assert exchange.reply is not None
        assert exchange.answer is not None
        seen = turn  # the items are those the client got: without the reasoning it did not see
        if not exchange.answer.prepared.decision.shown:
            seen = replace(turn, blocks=visible_blocks(turn.blocks, False))
        await state.history.keep(
            exchange.reply.id,
            tenant,
            exchange.kept,
            (*request.messages, turn.message()),
            exchange.codec.kept_items(inbound, exchange.reply, seen),
            exchange.offload,
        )


async def answer_whole(
    exchange: Exchange, inbound: Inbound, request: Request, answer: Answer
) -> web.StreamResponse:
    assembler = Assembler()
    hide = None if answer.prepared.decision.shown else ReasoningFilter()
    stream = answer.stream
    timing = exchange.ttft is None  # until the first content the client sees (`exchange.saw`)
    try:
        # the batches polled directly: a whole answer's are in (decoded whole at its commit
        # point), so no coroutine is made per batch nor an async generator per event
        try:
            while (batch := stream.poll()) is not None:
                if type(batch) is not list:
                    await batch  # type: ignore[misc]  # a future: a whole answer is never pushed
                    continue
                for event in batch:
                    if timing and (hide is None or hide.passes(event)):
                        exchange.saw(event)
                        timing = exchange.ttft is None
                    assembler.add(event)
        finally:
            await stream.aclose()
        turn = assembler.finish()
    except FORMAT_ERRORS as exc:
        exchange.outcome = "upstream_error"
        raise ClientError(
            502,
            f"{answer.target.provider} broke its own answer format: {exc}",
            type="upstream_error",
            code="protocol",
        ) from None
    exchange.usage = turn.usage
    exchange.turn = turn
    if assembler.error is None:
        await record_turn(exchange, inbound, request, turn)
    exchange.status = 200
    if not answer.prepared.decision.shown:  # kept whole above; the client asked for no reasoning
        turn = replace(turn, blocks=visible_blocks(turn.blocks, False))
    assert exchange.reply is not None
    state = exchange.state
    return state.json_answer(
        exchange.http, exchange.headers, exchange.codec.answer(inbound, exchange.reply, turn, state.sealer)
    )


async def answer_stream(
    exchange: Exchange, inbound: Inbound, request: Request, answer: Answer
) -> web.StreamResponse:
    state, http = exchange.state, exchange.http
    encoder = _stream_encoder(exchange, inbound)
    headers = {**exchange.headers, "Content-Type": encoder.content_type, "Cache-Control": "no-cache"}
    head = encoder.start()
    # with no opening to carry them (NDJSON, Gemini's SSE), the headers go out at once: the first
    # event may be a long thinking phase away, which a client's header timeout does not wait for
    response = state.stream_answer(http, headers, not head)
    assembler = Assembler()  # the turn as it streams, to record once it completed
    relay: Relay | None = None
    try:
        _bound_kernel_buffer(http)
        await response.prepare(http)
        state.in_flight.register_stream(http, response, encoder.error)  # ended this way at shutdown
        exchange.status = 200
        hide = None if answer.prepared.decision.shown else ReasoningFilter()
        relay = Relay(response, encoder, assembler, exchange, hide)
        if encoder.keepalive_seconds:
            relay.keep_alive(encoder.keepalive_seconds)
        try:
            error = await relay.run(answer, head)
            turn = None if error is not None else assembler.finish()
        except FORMAT_ERRORS as exc:
            # the upstream broke its own format after the commit point: end the stream well-formed
            log.warning("%s broke its stream format: %s", answer.target.provider, exc)
            error = UpstreamError(ErrorCategory.PROTOCOL, f"{answer.target.provider} broke its stream format")
            turn = None
        relay.stop_keeping_alive()
        if error is not None:
            # a half-finished turn is never recorded: its reasoning block may be cut short
            exchange.outcome = "stream_error"
            # the provider's message may quote what it was sent: never echo a secret
            exchange.error = state.redactor.text(error.message)
            await response.write(
                relay.held + encoder.error(dataclasses.replace(error, message=exchange.error))
            )
            return response
        assert turn is not None
        exchange.turn = turn
        await record_turn(exchange, inbound, request, turn)
        # what the relay held, the dialect's ending and the end of the chunked body in one write
        # (one send, one packet)
        await response.write_eof(relay.held + encoder.finish())
        return response
    finally:
        if relay is not None:
            relay.stop_keeping_alive()
        await answer.aclose()


# the kernel's send buffer for a streamed answer (Linux doubles it for its bookkeeping). Left to
# autotuning it grows to net.ipv4.tcp_wmem's maximum (4 MiB): a client that stops reading then
# takes that much of the answer before the relay feels it, kernel memory plus the answer's text
# held meanwhile. A stream's tokens come far slower than this buffer empties on any network.
STREAM_SEND_BUFFER = 64 * 1024


# the connections whose send buffer is bounded already: the bound lasts as long as the socket, so
# a keep-alive connection's later streams skip the call (through uvloop's socket stand-in, a
# socket object built and detached each time: a few microseconds per stream)
_BOUNDED: weakref.WeakSet[asyncio.BaseTransport] = weakref.WeakSet()


def _bound_kernel_buffer(http: web.Request) -> None:
    transport = http.transport
    if transport is None or transport in _BOUNDED:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SEND_BUFFER)
        except OSError:  # not a TCP socket (a test's pipe): nothing to bound
            pass
    _BOUNDED.add(transport)


def _stream_encoder(exchange: Exchange, inbound: Inbound) -> StreamEncoder:
    """The dialect's own stream, or the provider-agnostic NDJSON events when the client asks for
    them (`Accept: application/x-ndjson`), whatever dialect carried the request."""
    codec, sealer = exchange.codec, exchange.state.sealer
    if accepts_ndjson(exchange.http.headers.get("Accept", "")):
        return ServerToolsAsText(NdjsonEncoder(lambda kind, meta: codec.continuity_token(kind, meta, sealer)))
    assert exchange.reply is not None
    return codec.stream_encoder(inbound, exchange.reply, sealer)
