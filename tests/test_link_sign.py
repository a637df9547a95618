"""The meter sign in Debian's Chromium, headless, driven over the DevTools protocol.

What is compared: the sign page a controller serves is read (its DOM) and photographed
(a screenshot) after its live updates, then the same markup rendered by the server from the
ledger's own state, read straight from PostgreSQL, is photographed in the same browser; the
two pictures must be the same to the pixel. So the amount shown equals the ledger's at the
version the page shows, the newest once the broadcasts settle, and JACKPOT PENDING (its red
banner, table and seat) and LINK DOWN are on screen when they should be.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from PIL import Image, ImageChops
from tablectl.simulators.broker import PrivateBroker, free_port
from tablectl.simulators.floor import Floor
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.link import ledger
from tablectl.link.broadcast import state_of
from tablectl.link.sign.server import SignView, render_page, view_of
from tablectl.util.money import dollars

from .link_support import HANG_GUARD_S, ControllerProcess, new_database, prepare
from .link_support import write_config as link_config

pytestmark = pytest.mark.timeout(180)
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-port=0", "--window-size=1280,720",
)  # fmt: skip
VIEWPORT = {"width": 1280, "height": 720, "deviceScaleFactor": 1, "mobile": False}


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (make chromium installs it)")
    return found


class Page:
    """One browser tab over the DevTools protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._ids += 1
        await self.ws.send_json({"id": self._ids, "method": method, "params": params})
        async with asyncio.timeout(HANG_GUARD_S):
            while True:
                reply = await self.ws.receive_json()
                if reply.get("id") == self._ids:
                    if "error" in reply:
                        raise AssertionError(f"{method}: {reply['error']}")
                    result: dict[str, Any] = reply["result"]
                    return result

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def until(self, expression: str) -> Any:
        """The value of `expression` once the page makes it truthy (the page waits, checking
        at each frame; a hang fails here)."""
        waiter = (
            "new Promise(resolve => { const check = () => { const v = (" + expression + ");"
            " if (v) resolve(v); else requestAnimationFrame(check); }; check(); })"
        )
        async with asyncio.timeout(HANG_GUARD_S):
            result = await self.call(
                "Runtime.evaluate", expression=waiter, awaitPromise=True, returnByValue=True
            )
        return result["result"].get("value")

    async def screenshot(self) -> Image.Image:
        shot = await self.call("Page.captureScreenshot", format="png")
        return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")


@contextlib.asynccontextmanager
async def browser(profile: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """Chromium, its DevTools address read from the line it prints when it listens."""
    proc = await asyncio.create_subprocess_exec(
        chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    stderr = proc.stderr
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            while not (line := (await stderr.readline()).decode()).startswith("DevTools"):
                if not line:
                    raise AssertionError("chromium exited without listening")
        address = line.split("ws://", 1)[1].split("/", 1)[0]
        drain = asyncio.create_task(stderr.read(), name="chromium-stderr")  # never a full pipe
        async with aiohttp.ClientSession() as session:
            yield session, f"http://{address}"
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


@contextlib.asynccontextmanager
async def tab(session: aiohttp.ClientSession, devtools: str, url: str) -> AsyncIterator[Page]:
    async with session.put(f"{devtools}/json/new?{url}") as response:
        target = await response.json()
    async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
        page = Page(ws)
        await page.call("Emulation.setDeviceMetricsOverride", **VIEWPORT)
        await page.call("Page.reload")
        yield page
    async with session.get(f"{devtools}/json/close/{target['id']}"):
        pass


async def reference(
    session: aiohttp.ClientSession, devtools: str, view: SignView, where: Path
) -> Image.Image:
    """The server's own rendering of `view`, without the script, photographed."""
    await asyncio.to_thread(where.write_text, render_page(view, live=False))
    async with tab(session, devtools, where.as_uri()) as page:
        await page.until("document.readyState === 'complete'")
        return await page.screenshot()


def same_picture(live: Image.Image, ref: Image.Image) -> bool:
    return live.size == ref.size and ImageChops.difference(live, ref).getbbox() is None


async def test_the_sign_shows_the_ledgers_amount_pending_and_link_down(
    postgres: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    chromium()
    port = free_port()
    setup = link_config(
        tmp_path, new_database(postgres), broker, tables="floor-sim/t{001..003}",
        sign=f"127.0.0.1:{port}", link_timeout_s=1, broadcast_ms=100,
    )  # fmt: skip
    await prepare(setup)
    controller = ControllerProcess(setup.path, "sign-a")
    await controller.start()
    floor = Floor(broker.host, broker.port, "bank", 3)
    conn = await ledger.connect(setup.conninfo, application_name="test-sign")
    url = f"http://127.0.0.1:{port}/links/bank"
    import random

    rng = random.Random(5)

    async def ledger_view() -> SignView:
        (snapshot,) = await ledger.snapshots(conn)
        state = state_of(snapshot, "test")
        return view_of(state, link_id="bank", title="Mini Royal", timeout_ms=1000, shown="up",
                       reason=None)  # fmt: skip

    try:
        async with asyncio.TaskGroup() as tasks:
            running = tasks.create_task(floor.run(), name="floor")
            await floor.wait_ready(HANG_GUARD_S)
            for round_id in range(1, 8):
                floor.play_round(rng, round_id, 7)
            await floor.wait_acked(HANG_GUARD_S)
            async with (
                browser(tmp_path / "profile") as (session, devtools),
                tab(session, devtools, url) as page,
            ):
                # The amount: what the page shows is the ledger's, at the version it shows.
                view = await ledger_view()
                shown_version = await page.until(
                    # `?.`: right after Page.reload the old document may still answer.
                    f"document.getElementById('amount')?.dataset.version === '{view.version}'"
                    " && document.getElementById('amount').textContent"
                )
                assert shown_version == dollars(view.amount_cents)
                assert view.amount_cents > 100_000
                live = await page.screenshot()
                assert same_picture(
                    live, await reference(session, devtools, view, tmp_path / "a.html")
                )

                # A hit: JACKPOT PENDING, the table and seat, in the sign's red.
                claim_id = floor.tables[1].claim(8, 3)
                await page.until("!document.getElementById('pending').classList.contains('hidden')")
                view = await ledger_view()
                assert [(p.table, p.seat) for p in view.pending] == [("floor-sim/t002", 3)]
                text = await page.evaluate("document.getElementById('pending').innerText")
                assert (
                    f"table floor-sim/t002 seat 3: {dollars(view.pending[0].amount_cents)}" in text
                )
                await page.until(
                    f"document.getElementById('amount').dataset.version === '{view.version}'"
                )
                live = await page.screenshot()
                assert same_picture(
                    live, await reference(session, devtools, view, tmp_path / "b.html")
                )
                box = await page.evaluate(
                    "JSON.stringify(document.getElementById('pending').getBoundingClientRect())"
                )
                rect = json.loads(box)
                x, y = int(rect["x"] + 8), int(rect["y"] + rect["height"] / 2)
                assert live.getpixel((x, y)) == (0xC8, 0x10, 0x2E), "the banner is red"

                # The validation clears it.
                floor.tables[1].validate(claim_id)
                await page.until("document.getElementById('pending').classList.contains('hidden')")

                # No controller: LINK DOWN over the sign.
                assert controller.stop() == 0
                await page.until("!document.getElementById('down').classList.contains('hidden')")
                word = await page.evaluate("document.getElementById('down').firstChild.textContent")
                assert word == "LINK DOWN"
                reason = await page.evaluate("document.getElementById('down-reason').textContent")
                live = await page.screenshot()
                view = (await ledger_view()).model_copy(update={"shown": "down", "reason": reason})
                assert same_picture(
                    live, await reference(session, devtools, view, tmp_path / "c.html")
                )
                assert live.getpixel((640, 700)) != (5, 7, 13), "the overlay covers the sign"
            running.cancel()
    except* asyncio.CancelledError:
        pass
    finally:
        await conn.close()
        controller.stop()
