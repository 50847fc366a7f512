"""Writing a whole answer, in process: the CPU time per answer of building the response the
exchange returns for the small chat request's answer and of what aiohttp then runs on it
(`prepare`, `write_eof`, as its `finish_response` does), into a transport that keeps nothing.
Two builders: aiohttp's `web.Response` (with the app's `on_response_prepare` header restriction)
and the block written whole (gateway/whole_answer.py), alternated round by round.

    python bench/answer_write.py [--answers N] [--rounds R]

Prints microseconds per answer, the best and the median of the rounds, per builder.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

from aiohttp import web
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import make_mocked_request

from gateway.browser import CORS_ORIGIN
from gateway.security import restrict_response_headers
from gateway.state import json_response
from gateway.whole_answer import json_answer

# what the exchange sends for the bench's small request (gateway/exchange.py `_headers`)
HEADERS = {
    "X-Request-Id": "5f0c6e1a9b8d4c2e8f7a6b5c4d3e2f1a",
    "X-Gateway-Request-Id": "5f0c6e1a9b8d4c2e8f7a6b5c4d3e2f1a",
    "X-Session-Id": "3b9d0c4e5f6a7b8c9d0e1f2a3b4c5d6e",
    "X-Gateway-Provider": "stub",
    "X-Gateway-Attempts": "1",
}
BODY = (
    b'{"id":"chatcmpl-5f0c6e1a9b8d4c2e8f7a6b5c4d3e2f1a","object":"chat.completion","created":1700000000,'
    b'"model":"stub","choices":[{"index":0,"message":{"role":"assistant","content":"tok "},"logprobs":null,'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11,'
    b'"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}'
)


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class _Protocol:
    def __init__(self) -> None:
        self.transport = _Transport()
        self._paused = False
        self.ssl_context = self.peername = self.sockname = None


async def _requests(app: web.Application, count: int) -> list[web.Request]:
    """Requests to the chat route as the handler sees them (routed, past the guard)."""
    loop = asyncio.get_running_loop()
    out = []
    for _ in range(count):
        protocol = _Protocol()
        writer = StreamWriter(protocol, loop)  # type: ignore[arg-type]
        request = make_mocked_request(
            "POST",
            "/v1/chat/completions",
            app=app,
            writer=writer,
            protocol=protocol,
            transport=protocol.transport,
        )
        match = await app.router.resolve(request)
        match.add_app(app)
        match.freeze()
        request._match_info = match
        request[CORS_ORIGIN] = None
        out.append(request)
    return out


async def _handler(request: web.Request) -> web.Response:
    raise AssertionError("not called")


async def measure(answers: int, rounds: int) -> dict[str, list[float]]:
    app = web.Application()
    app.on_response_prepare.append(restrict_response_headers)
    app.router.add_post("/v1/chat/completions", _handler)
    app.freeze()
    builders = {"aiohttp Response": json_response, "block": json_answer}
    found: dict[str, list[float]] = {name: [] for name in builders}
    for _ in range(rounds + 1):  # the first round warms up
        for name, build in builders.items():
            requests = await _requests(app, answers)
            gc.collect()
            started = time.process_time()
            for request in requests:
                response = build(request, HEADERS, BODY)
                await response.prepare(request)
                await response.write_eof()
            found[name].append((time.process_time() - started) / answers * 1e6)
    return {name: values[1:] for name, values in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python bench/answer_write.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--answers", type=int, default=3000, help="per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    found = asyncio.run(measure(args.answers, args.rounds))
    print("us per whole answer written (build, prepare, write_eof), best / median of the rounds")
    for name, values in found.items():
        print(f"  {name:18} {min(values):6.2f} / {statistics.median(values):6.2f}")


if __name__ == "__main__":
    main()
