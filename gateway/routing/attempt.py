"""One upstream attempt up to the commit point: send, wait for the first content, and either hand
over the committed event stream or return the classified failure. Nothing here reaches the
client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable

from gateway.providers.base import HttpRequest, ProviderAdapter
from gateway.repair import Prepared
from gateway.routing.answer import CustomCallMapper, EventStream, IdMapper
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    ErrorCategory,
    Event,
    Finish,
    StreamError,
    UpstreamError,
    is_first_content,
)
from gateway.transcript.model import StopReason
from gateway.transcript.target import Target
from gateway.upstream import MAX_ERROR_BODY, HttpClient, Timeouts, Upstream, UpstreamFailure

_NO_LIMIT = contextlib.nullcontext()


def commits(event: Event) -> bool:
    """The commit point: the first text/reasoning/argument delta, a tool call, or the end of an
    (empty) answer. Before it a failure can still move to another target unseen."""
    return is_first_content(event) or type(event) is Finish


def run_attempt(
    session: HttpClient,
    adapter: ProviderAdapter,
    target: Target,
    prepared: Prepared,
    http: HttpRequest,
    stream: bool,
    timeouts: Timeouts,
    first_token: float | None,
) -> Awaitable[EventStream | UpstreamError]:
    """Send `http` and read up to the commit point. `first_token` (streaming only; None for no
    limit) bounds the wait for the first content, response headers included: a stalled target is
    abandoned so the next one can be tried. On success the stream is handed over with what was
    read before the commit point put back. (Not a coroutine itself: the caller awaits the one for
    its kind of answer directly, a frame less to resume each time the response wakes it.)"""
    upstream = Upstream(session, http, timeouts, stream=stream)
    if not stream:
        return _whole_attempt(upstream, adapter, target, prepared)
    return _streamed_attempt(upstream, adapter, target, prepared, first_token)


async def _streamed_attempt(
    upstream: Upstream,
    adapter: ProviderAdapter,
    target: Target,
    prepared: Prepared,
    limit: float | None,
) -> EventStream | UpstreamError:
    events: EventStream | None = None
    handed_over = False
    try:
        # no scope at all without a limit (a stream's last target)
        async with _NO_LIMIT if limit is None else asyncio.timeout(limit):
            await upstream.__aenter__()
            if upstream.status != 200:
                body = await upstream.read(MAX_ERROR_BODY, truncate=True)
                return adapter.classify_error(upstream.status, upstream.headers, body)
            mapper = IdMapper(target)
            custom = CustomCallMapper(prepared.custom_tools) if prepared.custom_tools else None
            decoder = adapter.stream_decoder(target, prepared.request)
            events = EventStream(mapper, upstream, decoder, custom=custom)
            buffered: list[Event] = []
            committed = False
            poll = events.poll
            while not committed:
                # the connection's future awaited here (not through `next_batch`): each arrival
                # before the commit point resumes one coroutine frame less
                while type(batch := poll()) is not list:
                    if batch is None:
                        break
                    await batch
                if batch is None:
                    break
                # `commits` inline, an error finish before it judged on the way (two calls per
                # event before the commit point); what follows it in the batch is put back as it came
                for at, event in enumerate(batch):
                    t = type(event)
                    if t is BlockDelta:
                        committed = bool(event.text)
                    elif t is BlockStart:
                        committed = event.kind is BlockKind.TOOL_CALL
                    elif t is Finish:
                        if event.stop_reason is StopReason.ERROR:
                            return _empty_error_answer(target)
                        committed = True
                    elif t is StreamError:
                        # an error before any content: nothing was shown, try elsewhere
                        return event.error
                    if committed:
                        buffered += batch[at:]
                        break
                    buffered.append(event)
            events.unread(buffered)
        handed_over = True
        return events
    except UpstreamFailure as failure:
        return failure.error
    except TimeoutError:  # only asyncio.timeout raises it here: Upstream converts its own
        return UpstreamError(
            ErrorCategory.TIMEOUT,
            f"no content from {target.provider} within {limit or 0:g}s",
            type="first_token_timeout",
        )
    finally:
        if not handed_over:
            if events is not None:
                await events.aclose()
            else:
                upstream.close()


async def _whole_attempt(
    upstream: Upstream, adapter: ProviderAdapter, target: Target, prepared: Prepared
) -> EventStream | UpstreamError:
    """A non-streamed answer: read whole, then decoded and judged at once (it has no commit point
    to wait for: it is in). A coroutine of its own, so the streamed path's scope and commit loop
    cost it nothing."""
    try:
        await upstream.__aenter__()
        if upstream.status != 200:
            body = await upstream.read(MAX_ERROR_BODY, truncate=True)
            return adapter.classify_error(upstream.status, upstream.headers, body)
        body = await upstream.read()
    except UpstreamFailure as failure:
        return failure.error
    finally:
        # the whole answer is in (or abandoned): the connection goes back to the pool (or is
        # closed) now, not when the stream would have been closed
        upstream.close()
    whole = _whole(adapter, target, prepared, body)
    if isinstance(whole, UpstreamError):
        return whole
    custom = CustomCallMapper(prepared.custom_tools) if prepared.custom_tools else None
    return EventStream(IdMapper(target), events=whole, custom=custom)


def _whole(
    adapter: ProviderAdapter, target: Target, prepared: Prepared, body: bytes
) -> list[Event] | UpstreamError:
    """The decoded answer, or why it failed: an error it holds (the first), or an error finish
    before any content or with no content at all (what the streamed path's commit loop finds)."""
    try:
        events = adapter.decode_response(body, target, prepared.request)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return UpstreamError(ErrorCategory.PROTOCOL, f"unreadable answer from {target.provider}: {exc}")
    committed = False  # the commit point passed (content, or any end)
    content = False  # content seen (a tool call, a delta with text)
    early = False  # an error finish before the commit point
    late = False  # an error finish after it
    for event in events:
        t = type(event)
        if t is StreamError:  # a whole answer that holds an error is a failed one
            return event.error
        if t is Finish:
            if event.stop_reason is StopReason.ERROR:
                if committed:
                    late = True
                else:
                    early = True
            committed = True
        elif not content and is_first_content(event):
            committed = content = True
    if early or (late and not content):
        return _empty_error_answer(target)
    return events


def _empty_error_answer(target: Target) -> UpstreamError:
    # e.g. Gemini MALFORMED_FUNCTION_CALL / OTHER, chat finish_reason "error": nothing to show, and
    # another target (or a retry) may well answer
    return UpstreamError(
        ErrorCategory.SERVER,
        f"{target.provider} ended its answer with an error before any content",
        type="error_finish",
    )
