"""A refused request's body: the client reads the 413 (or 401) however fast it uploads - the answer
goes out, the rest of the body is drained for a bounded time and number of bytes, then the
connection closes - and an unauthenticated client cannot make the gateway read without end."""

from __future__ import annotations

import asyncio

import aiohttp
import httpx
import openai
import orjson

from tests.security.conftest import HANG_GUARD, serving

# over the default 32 MiB limit: refused from its Content-Length, while the client is still
# sending (the kernel buffers on loopback hold a few MiB)
OVERSIZED = 40 * 1024 * 1024
ROUNDS = 3  # the reset used to depend on timing: every round must see the answer
TOKEN = "sec-client-token-9Vb3Nc6Lx1Kd5Fq7"


def _oversized_body() -> bytes:
    return orjson.dumps({"model": "claude", "messages": [{"role": "user", "content": "a" * OVERSIZED}]})


async def _aiohttp_status(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as resp:
        await resp.read()
        return resp.status


async def _httpx_status(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with httpx.AsyncClient(timeout=HANG_GUARD) as client:
        return (await client.post(url, content=body, headers=headers)).status_code


def _httpx_sync_status(url: str, body: bytes, headers: dict[str, str]) -> int:
    with httpx.Client(timeout=HANG_GUARD) as client:
        return client.post(url, content=body, headers=headers).status_code


async def _openai_status(base_url: str, api_key: str) -> int:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=HANG_GUARD)
    try:
        await client.chat.completions.create(
            model="claude", messages=[{"role": "user", "content": "a" * OVERSIZED}]
        )
    except openai.APIStatusError as exc:
        return exc.status_code
    finally:
        await client.close()
    raise AssertionError("an oversized request was accepted")


CLIENTS = ("aiohttp", "httpx", "httpx-sync", "openai")


async def _upload(client: str, base: str, body: bytes, headers: dict[str, str], api_key: str) -> int:
    url = base + "/v1/chat/completions"
    if client == "aiohttp":
        return await _aiohttp_status(url, body, headers)
    if client == "httpx":
        return await _httpx_status(url, body, headers)
    if client == "httpx-sync":
        return await asyncio.to_thread(_httpx_sync_status, url, body, headers)
    return await _openai_status(base + "/v1", api_key)


async def test_clients_uploading_at_full_speed_read_the_refusal():
    """413 (too large) and 401 (no token), read by each client in every round."""

    def with_auth(config: dict) -> None:
        config["auth"] = {"tokens_env": ["SEC_TOKEN"]}

    async with serving(with_auth, env={"SEC_TOKEN": TOKEN}) as gateway:
        body = _oversized_body()
        for authenticated, expected in ((True, 413), (False, 401)):
            headers = {"Authorization": f"Bearer {TOKEN}"} if authenticated else {}
            headers["Content-Type"] = "application/json"
            api_key = TOKEN if authenticated else "not-the-token-0000"
            seen: dict[str, list[int | str]] = {}
            for _ in range(ROUNDS):
                for name in CLIENTS:
                    try:
                        outcome: int | str = await asyncio.wait_for(
                            _upload(name, gateway.url, body, headers, api_key), HANG_GUARD
                        )
                    except (aiohttp.ClientError, httpx.HTTPError, openai.APIConnectionError) as exc:
                        outcome = type(exc).__name__  # what a reset looks like to that client
                    seen.setdefault(name, []).append(outcome)
            assert seen == {name: [expected] * ROUNDS for name in CLIENTS}, expected
        await gateway.serves_normally({"Authorization": f"Bearer {TOKEN}"})


async def test_an_unauthenticated_endless_body_is_not_read_past_the_linger_bound():
    """21 GiB in 9 s used to be read and dropped for one unauthenticated connection. Now at most
    `linger_max_bytes` are: the client here may send at most 256 MiB, the gateway must cut it off
    long before (what the kernel buffers hold besides is a few MiB)."""
    linger = 1024 * 1024

    def adjust(config: dict) -> None:
        config["auth"] = {"tokens_env": ["SEC_TOKEN"]}
        config["server"]["linger_max_bytes"] = linger

    async with serving(adjust, env={"SEC_TOKEN": TOKEN}) as gateway:
        reader, writer = await gateway.connect()
        answer = bytearray()

        async def read_answer() -> None:
            try:
                while chunk := await reader.read(65536):
                    answer.extend(chunk)
            except ConnectionError:
                pass

        reading = asyncio.create_task(read_answer())
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/json\r\n\r\n"
        )
        chunk = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
        sent = 0
        cut_off = False
        async with asyncio.timeout(HANG_GUARD):
            try:
                while sent < 256 * 1024 * 1024:
                    writer.write(chunk)
                    await writer.drain()
                    sent += len(chunk)
            except ConnectionError:
                cut_off = True
            await reading
        writer.close()
        assert cut_off, f"the gateway read all {sent} bytes"
        assert sent < 64 * 1024 * 1024
        assert bytes(answer).startswith(b"HTTP/1.1 401 Unauthorized\r\n")
        await gateway.serves_normally({"Authorization": f"Bearer {TOKEN}"})


async def test_a_body_that_stops_arriving_gets_a_408():
    def adjust(config: dict) -> None:
        config["server"]["body_timeout_seconds"] = 0.5
        config["server"]["linger_seconds"] = 0.5

    async with serving(adjust) as gateway:
        reader, writer = await gateway.connect()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n"
            b"Content-Type: application/json\r\n\r\n"
            b'{"model": "claude", '
        )
        await writer.drain()  # ...and nothing more: the body never completes
        async with asyncio.timeout(HANG_GUARD):
            raw = await reader.read()  # to the end: the gateway closes the connection after its answer
        writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert orjson.loads(body)["error"]["code"] == "body_timeout"
        assert gateway.hub.states["anthropic"].requests == []
        await gateway.serves_normally()
