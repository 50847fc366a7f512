"""The real Claude Code CLI with rich content: a PNG it reads with its own Read tool moves through
every family in one continued session (each family gets it where its wire takes it, or a counted
placeholder), and a context-window overflow on any family is Claude Code's own "prompt is too
long" error, on which it compacts."""

from __future__ import annotations

import base64
import struct
import zlib

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.simulators.base import Reply, ToolCallSpec
from tests.clients.node_clis import Clients, install
from tests.e2e.test_claude_code import KIND, ORDER, claude_code, run
from tests.metric_reads import repairs_counted

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def clients() -> Clients:
    return install()


def png(width: int = 8, height: int = 8) -> bytes:
    """A small valid RGB PNG (a red square), built with the standard library."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _sees(family: str, stack) -> bool:
    model = stack.config.models[family].targets[0].model
    return get_adapter(KIND[family]).capabilities.media.sees_images(model)


async def test_a_png_read_by_claude_code_moves_through_every_family(clients, tmp_path):
    async with claude_code(clients, tmp_path) as (stack, cli, work):
        image = work / "dot.png"
        image.write_bytes(png())
        encoded = base64.b64encode(image.read_bytes()).decode()
        for n, family in enumerate((*ORDER, "claude")):
            state = stack.hub.states[KIND[family]]
            state.push(
                Reply(
                    reasoning="Look at the file.",
                    tool_calls=[ToolCallSpec("Read", {"file_path": str(image)})],
                ),
                Reply(text=f"A red square ({n})."),
            )
            prompt = f"What is in dot.png? ({n})"
            finished = await run(cli, prompt, work, model=family, continue_session=n > 0)
            assert finished.returncode == 0, finished.stdout + finished.stderr
            result = finished.json()
            assert result["is_error"] is False and result["result"] == f"A red square ({n}).", result
            assert state.rejections == [], (family, state.rejections)
            sent = orjson.dumps(state.requests[-1].body).decode()
            kind = KIND[family]
            placement = get_adapter(kind).capabilities.media.tool_result_images.value
            if _sees(family, stack):
                # Claude Code sends the PNG as it read it (or re-encoded): an image reaches the model
                assert encoded in sent or "image/png" in sent, family
                if placement == "after":  # out of the tool result, into the user turn after it
                    assert repairs_counted(stack.metrics, family, "tool_result_media_moved") > 0
            else:
                assert "[image omitted" in sent, family
                assert repairs_counted(stack.metrics, family, "media_as_placeholder") > 0
        # back at Anthropic: every earlier turn's image is still in the history, in tool results
        last = stack.hub.states["anthropic"].requests[-1].body
        images = [
            part
            for m in last["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
            for part in b["content"]
            if part.get("type") == "image"
        ]
        assert len(images) == len(ORDER) + 1


@pytest.mark.parametrize("family", ORDER)
async def test_an_overflow_on_any_family_is_claude_codes_prompt_too_long(clients, tmp_path, family):
    async with claude_code(clients, tmp_path) as (stack, cli, work):
        stack.hub.states[KIND[family]].context_window = 10  # every request is too long
        finished = await run(cli, "Say hello.", work, model=family)
        output = finished.stdout + finished.stderr
        # Claude Code reports the API's overflow in its own words ("Prompt is too long")
        assert "prompt is too long" in output.lower(), output
        assert stack.hub.states[KIND[family]].rejections, "the simulator refused it as too long"
