"""A capture the ring keeps (one pickled blob, gateway/inspector/capture.py `Kept`) opens as the
capture that was made: equal field by field, with the objects the views compare by identity
still shared, so every view of it is the same."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gateway.inspector as inspector_module
from gateway.inspector.capture import Capture, Kept, Ring
from gateway.inspector.views import detail, summary
from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.repair.report import Repair
from gateway.routing.answer import Attempt
from gateway.simulators.base import SimulatorHub
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.transcript.model import AssistantTurn, StopReason, Text, Usage
from tests.inspector.loop import inspector_gateway, run_loop, script
from tests.inspector.test_capture import BLANK
from tests.property.transcripts import KINDS, requests, target_for


def _same_graph(a: object, b: object) -> None:
    """`b` shares objects among its fields exactly where `a` does."""
    fields = Capture.__dataclass_fields__
    ids_a = {name: id(getattr(a, name)) for name in fields}
    ids_b = {name: id(getattr(b, name)) for name in fields}
    for x in fields:
        for y in fields:
            if not isinstance(getattr(a, x), (int, float, str, bytes, type(None), bool, tuple)):
                assert (ids_a[x] == ids_a[y]) == (ids_b[x] == ids_b[y]), (x, y)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_kept_capture_opens_as_made(data):
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    target = target_for(kind, data.draw(st.booleans(), label="thinking"))
    received = data.draw(requests(target, False), label="request")
    prepared = prepare(received, target, get_adapter(kind).capabilities)
    failed = UpstreamError(ErrorCategory.RATE_LIMIT, "slow down", 429, "rate_limit", None, 2.0)
    capture = replace(
        BLANK,
        id="req",
        headers={"content-type": "application/json"},
        raw=b'{"model":"m"}',
        received=received,
        routed=data.draw(st.sampled_from([received, prepared.request]), label="routed"),
        restored=(Repair("continuity_restored", "x"),) if data.draw(st.booleans()) else (),
        repairs=prepared.repairs,
        attempts=(
            Attempt("other", "rate_limit", failed, "m2", None, b"", "http://x", 1.0, 0.5),
            Attempt(kind, "ok", None, target.model, prepared, b"{}", "http://y", 1.5, 0.25),
        ),
        usage=Usage(3, 4),
        turn=AssistantTurn([Text("hi")], StopReason.END_TURN, Usage(3, 4), "r", "m"),
        size=10,
    )
    opened = Kept(capture).open()
    assert opened == capture
    assert opened.headers is capture.headers
    _same_graph(capture, opened)
    assert detail(opened) == detail(capture)
    assert summary(opened) == summary(capture)


@pytest.fixture
async def hub():
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


async def test_the_captures_of_a_tool_loop_open_with_the_same_views(hub, monkeypatch):
    """Three families in one conversation (reasoning with its continuity restored, tool ids
    projected, placeholders inserted): what the ring gives back shows what was captured."""
    made: list[Capture] = []
    capture_of = inspector_module.capture_of

    def keeping(exchange, headers):
        made.append(capture_of(exchange, headers))
        return made[-1]

    monkeypatch.setattr(inspector_module, "capture_of", keeping)
    script(hub)
    async with inspector_gateway(hub) as gw:
        await run_loop(gw.url)
        ring: Ring = gw.state.inspector.ring
        assert len(made) == 3 and len(ring) == 3
        for capture in made:
            opened = ring.get(capture.id)
            assert opened == capture
            _same_graph(capture, opened)
            assert detail(opened) == detail(capture)
        marks = {row["mark"] for c in made for row in detail(c)["transcript"]["provider"]}
        assert {"inserted", "projected"} <= marks
