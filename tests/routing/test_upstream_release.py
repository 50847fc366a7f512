"""An answered attempt lets go of its upstream response at once: nothing of it (the response, its
headers, the request body sent) waits for the `total` timeout's timer. Left to the timer, a busy
gateway held every answer of the last `total_seconds` (600 s by default) in memory."""

from __future__ import annotations

import gc

import pytest

from gateway.routing.engine import AllTargetsFailed, Engine
from gateway.simulators.base import Fault, Reply
from gateway.upstream import Upstream
from tests.routing.sim_stack import ask, collect, engine_for, group

SOLO = {"solo": group("openai-chat")}


def pending_deadlines(engine: Engine) -> int:
    """Upstream `total` deadlines and idle watchdogs still pending (the client's books: the only
    place they live)."""
    return len(engine.session.deadlines) + len(engine.session.idles)


def live_upstreams() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Upstream)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_an_answer_releases_its_upstream(hub, stream):
    state = hub.states["openai_chat"]
    for _ in range(5):
        state.push(Reply(text="An answer."))
    state.push(Fault(status=400))
    async with engine_for(hub, SOLO) as engine:
        for _ in range(5):
            answer = await engine.open(ask("solo", stream=stream), engine.router.plan("solo"))
            assert (await collect(answer)).text == "An answer."
            del answer
        with pytest.raises(AllTargetsFailed):  # a refused request lets go of its upstream too
            await engine.open(ask("solo", stream=stream), engine.router.plan("solo"))
        assert pending_deadlines(engine) == 0
        assert live_upstreams() == 0
