"""Makes docs/inspector.png (the README's picture of /inspector): a Claude -> Gemini -> Mistral
tool loop on the simulators, the page open on the Mistral turn, in headless Chromium.

    PYTHONPATH=. python docs/inspector_screenshot.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import async_playwright

from gateway.simulators.base import SimulatorHub
from tests.inspector.loop import inspector_gateway, run_loop, script
from tests.ui.conftest import FLAGS, find_chromium

OUT = Path(__file__).with_name("inspector.png")


async def main() -> None:
    async with SimulatorHub() as hub:
        script(hub)
        async with inspector_gateway(hub) as gw, async_playwright() as playwright:
            loop = await run_loop(gw.url)
            browser = await playwright.chromium.launch(executable_path=find_chromium(), args=FLAGS)
            page = await browser.new_page(viewport={"width": 1200, "height": 760})
            await page.goto(f"{gw.url}/inspector")
            await page.click(f"#req-{loop.ids[2]}")
            await page.locator("#detail .sides").wait_for()
            await page.screenshot(path=str(OUT))
            await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
