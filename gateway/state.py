"""What request handlers share, stored on the aiohttp app under one typed key."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from aiohttp import web

from gateway.access_log import log_access
from gateway.config import GatewayConfig
from gateway.continuity.recorder import Recorder
from gateway.metrics import Metrics, RequestRecord
from gateway.redaction import Redactor
from gateway.routing.engine import Engine
from gateway.store.failopen import FailOpenStore
from gateway.transcript.seal import Sealer

log = logging.getLogger("gateway")


@dataclass(slots=True)
class GatewayState:
    config: GatewayConfig
    metrics: Metrics
    engine: Engine
    store: FailOpenStore
    recorder: Recorder
    # scrubs provider keys and client tokens from text a client or a log will see
    redactor: Redactor = field(default_factory=Redactor)
    # authenticates the continuity data handed to clients in reasoning_details
    sealer: Sealer = field(default_factory=Sealer)

    KEY = web.AppKey("gateway_state", object)  # typed access: request.app[GatewayState.KEY]

    def observe(self, record: RequestRecord) -> None:
        """The one place a finished request is accounted for: metrics, then its access-log line
        (written even if a malformed upstream figure broke the metrics update)."""
        try:
            self.metrics.record(record)
        except Exception:
            log.exception("metrics update failed for request %s", record.request_id)
        log_access(record)
