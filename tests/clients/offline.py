"""The agent apps' runs stay on loopback, and a run that reaches further fails its test.

Every run's environment (node_clis._base_env) names one listener on 127.0.0.1 as its HTTP(S)
proxy, its npm registry and its Python package index; loopback is exempt from the proxy
(NO_PROXY), so the gateway under test is reached directly. The listener answers every request
403 and remembers its first line; `run_cli` fails the run when anything arrived during it. An app
that ignored the proxy variables and opened its own connection would go unseen here: the apps in
use (Bun-built opencode and Claude Code, Rust-built Codex, Node-built Gemini CLI and qwen-code,
aider on httpx) all honour them.

One listener serves the whole test process (a daemon thread, started on first use): runs of one
process never overlap across tests, and a request seen during a run is that run's.
"""

from __future__ import annotations

import socketserver
import threading

LOOPBACK = "127.0.0.1,localhost,::1"
HEAD_LIMIT = 8192  # bytes of a request's head kept: enough for its request line and Host


class _Refuse(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(5.0)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                chunk = self.request.recv(4096)
                if not chunk:
                    break
                head += chunk
        except OSError:
            pass
        self.server.guard._seen(head)  # type: ignore[attr-defined]
        try:
            self.request.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class Guard:
    """The listener: `url` to point clients at, `seen` the request lines that reached it."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Refuse)
        self._server.guard = self  # type: ignore[attr-defined]
        self._lock = threading.Lock()
        self.seen: list[str] = []
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, name="offline-guard", daemon=True).start()

    def _seen(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        host = next((line for line in lines[1:] if line.lower().startswith("host:")), "")
        with self._lock:
            self.seen.append(f"{lines[0]} ({host})" if host else lines[0] or "(a connection, no request)")

    def mark(self) -> int:
        with self._lock:
            return len(self.seen)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self.seen[mark:]

    def env(self) -> dict[str, str]:
        """What points a run's every way out at this listener."""
        env = {}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            env[name] = env[name.lower()] = self.url
        env["NO_PROXY"] = env["no_proxy"] = LOOPBACK
        # package installs at run time (opencode's own npm, an npx a tool call runs, pip) ask this
        # listener directly even where a client would skip the proxy for its registry
        env["npm_config_registry"] = f"{self.url}/"
        env["PIP_INDEX_URL"] = f"{self.url}/simple/"
        return env


_guard: Guard | None = None
_guard_lock = threading.Lock()


def guard() -> Guard:
    global _guard
    with _guard_lock:
        if _guard is None:
            _guard = Guard()
        return _guard


class ReachedTheNetwork(AssertionError):
    pass


def check(mark: int, argv0: str) -> None:
    """Fail when anything reached the listener since `mark` (taken before the run started)."""
    seen = guard().since(mark)
    if seen:
        raise ReachedTheNetwork(f"{argv0} reached beyond loopback during its run: {seen}")
