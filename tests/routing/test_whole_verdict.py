"""A whole (non-streamed) answer is judged in one pass (`attempt._whole`): the same verdict as the
two checks it replaced, a scan of the decoded events and the streamed path's commit loop run on
the one batch, for any sequence of events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.routing.attempt import _empty_error_answer, _whole, commits
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    StreamError,
    UpstreamError,
)
from gateway.transcript.model import Message, Request, Role, StopReason, Text
from gateway.transcript.target import Target

TARGET = Target("p", "openai_chat", "gpt-4.1", "http://127.0.0.1:1/v1")
PREPARED = prepare(
    Request("g", (Message(Role.USER, (Text("hi"),)),), stream=False),
    TARGET,
    get_adapter("openai_chat").capabilities,
)

EVENTS = st.sampled_from(
    [
        BlockStart(0, BlockKind.TEXT),
        BlockDelta(0, ""),
        BlockDelta(0, "text"),
        BlockStop(0),
        BlockStart(1, BlockKind.TOOL_CALL, "call_1", "f"),
        BlockDelta(1, "{}"),
        Finish(StopReason.END_TURN),
        Finish(StopReason.ERROR),
        StreamError(UpstreamError(ErrorCategory.SERVER, "first")),
        StreamError(UpstreamError(ErrorCategory.OVERLOADED, "second")),
    ]
)


class Decoded:
    """An adapter whose answer decodes to the given events."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def decode_response(self, body: bytes, target: Target, request: Request | None = None) -> list[Event]:
        return self.events


def _error_finish(event: Event) -> bool:
    return type(event) is Finish and event.stop_reason is StopReason.ERROR


def reference(events: list[Event]) -> list[Event] | UpstreamError:
    """The verdict as it was reached before: the scan, then the commit loop over the one batch."""
    for event in events:
        if type(event) is StreamError:
            return event.error
    if any(_error_finish(e) for e in events) and not any(
        commits(e) for e in events if type(e) is not Finish and type(e) is not StreamError
    ):
        return _empty_error_answer(TARGET)
    committed = False
    for event in events:
        if type(event) is StreamError:
            if not committed:
                return event.error
        elif not committed and _error_finish(event):
            return _empty_error_answer(TARGET)
        committed = committed or commits(event)
    return events


@given(st.lists(EVENTS, max_size=8))
def test_the_one_pass_verdict_is_the_two_checks_verdict(events: list[Event]) -> None:
    assert _whole(Decoded(events), TARGET, PREPARED, b"") == reference(events)


def test_an_error_finish_after_a_plain_finish_with_no_content_is_a_failure() -> None:
    events: list[Event] = [Finish(StopReason.END_TURN), Finish(StopReason.ERROR)]
    assert _whole(Decoded(events), TARGET, PREPARED, b"") == _empty_error_answer(TARGET)
    answered: list[Event] = [BlockDelta(0, "x"), Finish(StopReason.ERROR)]
    assert _whole(Decoded(answered), TARGET, PREPARED, b"") is answered
