"""Sans-IO Server-Sent Events framing (bytes in, (event, data) pairs out) with a bounded line
length, so a hostile or broken upstream cannot make the gateway buffer without limit.

Written here rather than taken from a library: httpx-sse imports httpx at package import and
aiohttp ships no client-side SSE decoder; the framing rules (WHATWG event-stream) are small.
"""

from __future__ import annotations

# `find`, not `in`, searches a chunk: `bytes.__contains__` tries its operand as a byte value first
# and formats the TypeError a bytes operand raises before it searches (~1.9k instructions, more
# than the rest of a chunk's framing)

DEFAULT_MAX_LINE = 4 * 1024 * 1024
# one event may be split over many data lines: bound the event as a whole too
DEFAULT_MAX_EVENT = 16 * 1024 * 1024


class SSELineTooLong(ValueError):
    pass


class SSEParser:
    __slots__ = ("_buf", "_event", "_data", "_size", "_max_line", "_max_event")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, max_event: int = DEFAULT_MAX_EVENT) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._max_line = max_line
        self._max_event = max_event

    def one_data(self, chunk: bytes) -> bytes | None:
        """The data of a chunk that is exactly one unnamed `data: DATA\\n\\n` event within the
        limits, with nothing pending (nearly every Chat Completions and Gemini chunk), as bytes
        (`feed` gives `[("", DATA decoded)]` for it); None for anything else, and then `feed`
        frames the chunk. A decoder that parses the bytes itself skips the UTF-8 decode."""
        end = len(chunk) - 2
        if (  # two searches
            chunk[:6] == b"data: "
            and chunk[end:] == b"\n\n"
            and not self._buf
            and not self._data
            and not self._event
            and chunk.find(b"\n", 6) == end
            and chunk.find(b"\r") < 0
            and end <= self._max_line
            and end - 6 <= self._max_event
        ):
            return chunk[6:end]
        return None

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        if not self._buf and not self._data and not self._event:
            # nearly every upstream chunk is whole events of one `data:` line each, with or
            # without an `event:` line (a provider writes an event at a time): framed with a few
            # searches, the same pairs the lines below give
            data = self.one_data(chunk)
            if data is not None:
                return [("", data.decode("utf-8", "replace"))]
            whole = self.whole_frames(chunk)
            if whole is not None:
                return [(name, data.decode("utf-8", "replace")) for name, data in whole]
        buf = self._buf + chunk if self._buf else chunk
        if buf.find(b"\n") < 0 and buf.find(b"\r") < 0:
            if len(buf) > self._max_line:
                raise SSELineTooLong(f"SSE line longer than {self._max_line} bytes")
            self._buf = buf
            return []
        if buf.find(b"\r") >= 0:
            # a lone trailing \r may be the first half of \r\n: keep it for the next chunk
            keep_cr = buf.endswith(b"\r")
            if keep_cr:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buf += b"\r"
        lines = buf.split(b"\n")
        rest = lines.pop()
        if len(rest) > self._max_line:
            raise SSELineTooLong(f"SSE line longer than {self._max_line} bytes")
        self._buf = rest
        out: list[tuple[str, str]] = []
        for raw in lines:
            if len(raw) > self._max_line:
                raise SSELineTooLong(f"SSE line longer than {self._max_line} bytes")
            self._line(raw, out)
        return out

    def whole_frames(self, chunk: bytes) -> list[tuple[str, bytes]] | None:
        """The events of a chunk made only of `[event: NAME\\n]data: DATA\\n\\n` frames within the
        limits, with nothing pending, each data as its bytes (`feed` gives them decoded); None for
        anything else (the line-by-line framing handles it). Walked by offsets: no copy of the
        chunk, only each name decoded and each data sliced. A decoder that parses the bytes itself
        (`SSEStreamDecoder.on_data`) takes a chunk of several events (a stream's first read: its
        opening and first content; its last: the finish, the usage and [DONE]) without the UTF-8
        decode of each."""
        if not chunk.endswith(b"\n\n") or chunk.find(b"\r") >= 0 or self._buf or self._data or self._event:
            return None
        max_line, max_event = self._max_line, self._max_event
        out: list[tuple[str, bytes]] = []
        size, at = len(chunk), 0
        while at < size:
            name = ""
            if chunk.startswith(b"event: ", at):
                end = chunk.find(b"\n", at)
                if end - at > max_line:
                    return None
                name = chunk[at + 7 : end].decode("utf-8", "replace")
                at = end + 1
            if not chunk.startswith(b"data: ", at):
                return None
            end = chunk.find(b"\n", at)  # found: the chunk ends with one
            if chunk[end + 1 : end + 2] != b"\n" or end - at > max_line or end - at - 6 > max_event:
                return None
            out.append((name, chunk[at + 6 : end]))
            at = end + 2
        return out

    def finish(self) -> list[tuple[str, str]]:
        """End of stream: a final event without its blank line still counts."""
        out: list[tuple[str, str]] = []
        if self._buf:
            self._line(self._buf.rstrip(b"\r"), out)
            self._buf = b""
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[tuple[str, str]]) -> None:
        if not raw:
            if self._data or self._event:
                out.append((self._event, "\n".join(self._data)))
                self._event = ""
                self._data = []
                self._size = 0
            return
        if raw[0] == 58:  # b":" comment / keep-alive
            return
        name, sep, value = raw.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._size += len(value)
            if self._size > self._max_event:
                raise SSELineTooLong(f"SSE event larger than {self._max_event} bytes")
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        # id / retry / unknown fields carry nothing a provider stream needs
