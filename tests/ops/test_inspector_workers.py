"""The inspector under `gateway serve --workers 2`: a request served by one worker is listed,
shown, previewed and fed live by the other (each keeps its own captures; siblings ask each other
over their private sockets)."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import orjson

from gateway.simulators.base import SimulatorHub
from tests.ops.conftest import USER
from tests.ops.test_serve import KEY
from tests.ops.test_workers import one_connection_per_worker, workers


async def test_every_worker_shows_every_workers_requests(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        a, b = await one_connection_per_worker(gateway, 2)
        watcher = aiohttp.ClientSession()  # the feed holds its connection: one of its own
        try:
            # whichever worker serves the feed, one of the two requests is the other worker's
            async with watcher.get(gateway.url + "/inspector/api/events") as events:
                assert events.status == 200
                assert await events.content.readline() == b": inspector feed\n"
                ids = []
                for conn in (a, b):
                    async with conn.http.post(
                        gateway.url + "/v1/chat/completions", json={"model": "claude", "messages": USER}
                    ) as resp:
                        assert resp.status == 200
                        ids.append(resp.headers["X-Gateway-Request-Id"])
                fed = set()
                while len(fed) < 2:  # a's feed carries b's request too
                    line = await asyncio.wait_for(events.content.readline(), 10)
                    if line.startswith(b"data: "):
                        fed.add(orjson.loads(line[6:])["id"])
                assert fed == set(ids)
            for conn in (a, b):
                status, body = await conn.request("GET", "/inspector/api/requests")
                assert status == 200
                assert {s["id"] for s in orjson.loads(body)} == set(ids)
                for request_id in ids:
                    status, body = await conn.request("GET", f"/inspector/api/requests/{request_id}")
                    assert status == 200 and orjson.loads(body)["id"] == request_id
                    status, body = await conn.request(
                        "POST", f"/inspector/api/requests/{request_id}/preview", {"model": "claude"}
                    )
                    assert status == 200, body
                    assert orjson.loads(body)["target"]["provider"] == "claude"
                status, _ = await conn.request("GET", "/inspector/api/requests/unknown")
                assert status == 404
        finally:
            await watcher.close()
            await a.close()
            await b.close()
        assert len(hub.states["anthropic"].requests) == 2  # previews called no provider
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.finish() == 0
