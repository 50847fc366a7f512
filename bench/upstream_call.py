"""The upstream call alone, in process: `Upstream` entered, read and closed against a loopback stub
in another process, this process's CPU time per call (whole answers at c=1 and c=32) and per
streamed chunk read (128 streams x 64 chunks 3 ms apart). Compare two trees in one sitting:

    PYTHONPATH=/work/wt/s5 python bench/upstream_call.py
    PYTHONPATH=. python bench/upstream_call.py
"""

import asyncio
import subprocess
import sys
import time

import uvloop

from gateway.providers.base import HttpRequest
from gateway.upstream import Timeouts, Upstream, client_session

WHOLE_STUB = r"""
import asyncio, sys
BODY = (
    b'{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":'
    b'{"role":"assistant","content":"An answer."},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":3}}'
)
RESP = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
    b"Date: Fri, 27 Nov 2026 12:00:00 GMT\r\nServer: stub\r\n\r\n" % len(BODY) + BODY
)
class P(asyncio.Protocol):
    def connection_made(self, t): self.t = t; self.buf = b""
    def data_received(self, d):
        self.buf += d
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0: return
            head = self.buf[:i].lower()
            n = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(self.buf) < i + 4 + n: return
            self.buf = self.buf[i + 4 + n:]
            self.t.write(RESP)
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""

STREAM_STUB = r"""
import asyncio, sys, uvloop
CHUNK = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk",'
    b'"choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'
)
FRAME = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(n)
            writer.write(HEAD)
            for _ in range(64):
                await asyncio.sleep(0.003)
                writer.write(FRAME)
            writer.write(b"0\r\n\r\n")
    except Exception:
        writer.close()
async def main():
    s = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(s.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
uvloop.run(main())
"""


def _stub(source: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE)
    return process, int(process.stdout.readline())


def _call(port: int, accept: str, body: bytes) -> HttpRequest:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-x", "Accept": accept}
    return HttpRequest(f"http://127.0.0.1:{port}/v1/chat/completions", headers, body)


async def _calls(one, concurrency: int, each: int) -> None:
    async def worker():
        for _ in range(each):
            await one()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def whole(n: int, port: int) -> None:
    session = client_session()
    req = _call(port, "application/json", b'{"model":"m","messages":[{"role":"user","content":"hi"}]}')
    t = Timeouts()

    async def one():
        async with Upstream(session, req, t, stream=False) as up:
            assert up.status == 200
            await up.read()

    await _calls(one, 1, 200)
    for conc in (1, 32):
        c0 = time.process_time()
        await _calls(one, conc, n // conc)
        print(f"whole answers, c={conc}: {(time.process_time() - c0) / n * 1e6:.1f} us CPU/call")
    await session.close()


async def streamed(n: int, port: int) -> None:
    session = client_session()
    req = _call(port, "text/event-stream", b'{"model":"m","stream":true}')
    t = Timeouts()
    chunks = 0

    async def one():
        nonlocal chunks
        async with Upstream(session, req, t, stream=True) as up:
            while True:  # as the relay takes (gateway/routing/answer.py `poll`)
                chunk = up.take()
                if type(chunk) is not bytes:
                    await chunk
                elif chunk:
                    chunks += 1
                else:
                    break

    await _calls(one, 64, 2)
    chunks = 0
    c0 = time.process_time()
    await _calls(one, 128, n // 128)
    print(f"128 streams: {(time.process_time() - c0) / chunks * 1e6:.2f} us CPU/chunk read ({chunks} reads)")
    await session.close()


def main() -> None:
    for source, run, n in ((WHOLE_STUB, whole, 8000), (STREAM_STUB, streamed, 1280)):
        process, port = _stub(source)
        try:
            uvloop.run(run(n, port))
        finally:
            process.kill()


if __name__ == "__main__":
    main()
