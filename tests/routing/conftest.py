from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.simulators.base import SimulatorHub


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    # handler_cancellation: a connection the gateway abandons ends the simulated generation
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub
