"""The meter sign: one web page per link, kept current by server-sent events (aiohttp).

The page shows what the tables hear: the controllers' state broadcasts (every controller's,
as received from the broker), the newest version's amounts, JACKPOT PENDING with table and
seat while an award awaits validation, and LINK DOWN when no controller has said `up` within
the link's timeout (or LINK CLOSED when the ledger says the link is not in operation). The
page also says LINK DOWN on its own when the events stop (the sign's server went away).

The first rendering is the server's (`render_page`), the same markup the page's script
writes afterwards, so a screenshot of the live page can be compared with a reference
rendering of the ledger's own state.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import importlib.resources
import json
import time
from collections import defaultdict
from collections.abc import Callable
from string import Template
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from tablectl.link.contract import LinkState
from tablectl.util.money import dollars

Shown = Literal["up", "down", "closed"]
HEARTBEAT_S = 1.0


class SignLevel(BaseModel):
    model_config = ConfigDict(frozen=True)
    title: str
    amount_cents: int


class SignPending(BaseModel):
    model_config = ConfigDict(frozen=True)
    table: str
    seat: int
    amount_cents: int


class SignView(BaseModel):
    """What a sign shows, derived from the broadcasts (and sent to the page as JSON)."""

    model_config = ConfigDict(frozen=True)
    link_id: str
    title: str
    shown: Shown
    reason: str | None
    version: int
    amount_cents: int
    levels: list[SignLevel]
    pending: list[SignPending]
    timeout_ms: int


def view_of(state: LinkState | None, *, link_id: str, title: str, timeout_ms: int,
            shown: Shown, reason: str | None) -> SignView:  # fmt: skip
    return SignView(
        link_id=link_id,
        title=title,
        shown=shown,
        reason=reason,
        version=state.version if state else 0,
        amount_cents=state.amount_cents if state else 0,
        levels=[SignLevel(title=lv.title, amount_cents=lv.amount_cents) for lv in state.levels]
        if state
        else [],
        pending=[
            SignPending(table=f"{p.site}/{p.table}", seat=p.seat, amount_cents=p.amount_cents)
            for p in state.pending
        ]
        if state
        else [],
        timeout_ms=timeout_ms,
    )


class SignBoard:
    """Every link's broadcasts as received; which one to show, and who is watching."""

    def __init__(
        self,
        links: dict[str, tuple[str, int]],  # link_id -> (title, link_timeout_ms)
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.links = links
        self._clock = clock
        self._best: dict[str, LinkState] = {}
        self._last_up: dict[str, float] = {}
        self._last_down: dict[str, LinkState] = {}
        self._watchers: defaultdict[str, set[asyncio.Event]] = defaultdict(set)

    def offer(self, state: LinkState, live: bool = True) -> None:
        """A broadcast heard; `live` False for the retained copy a subscription hands over."""
        if state.link_id not in self.links:
            return
        if state.state == "down":
            self._last_down[state.link_id] = state
        else:
            best = self._best.get(state.link_id)
            if best is None or state.version >= best.version:
                self._best[state.link_id] = state
            if state.state == "up" and live:
                self._last_up[state.link_id] = self._clock()
        for watcher in self._watchers[state.link_id]:
            watcher.set()

    def view(self, link_id: str) -> SignView:
        title, timeout_ms = self.links[link_id]
        best = self._best.get(link_id)
        shown: Shown = "up"
        reason = None
        if best is None:
            shown, reason = "down", "no controller heard yet"
        elif best.state == "closed":
            shown, reason = "closed", best.reason
        elif self._clock() - self._last_up.get(link_id, -1e18) > timeout_ms / 1000:
            down = self._last_down.get(link_id)
            shown = "down"
            reason = down.reason if down else f"no broadcast for {timeout_ms // 1000} s"
        return view_of(
            best, link_id=link_id, title=title, timeout_ms=timeout_ms, shown=shown, reason=reason
        )

    def watch(self, link_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self._watchers[link_id].add(event)
        return event

    def unwatch(self, link_id: str, event: asyncio.Event) -> None:
        self._watchers[link_id].discard(event)

    def wake_all(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.set()


# --- the page ---------------------------------------------------------------------------------


def _resource(name: str) -> str:
    return importlib.resources.files("tablectl.link.sign").joinpath(name).read_text("utf-8")


def render_page(view: SignView, *, live: bool) -> str:
    """The page as the server first sends it; `live=False` leaves out the script (a
    reference rendering of a given state, for comparison)."""
    page = Template(_resource("page.html"))
    esc = html.escape
    levels = "".join(
        f"<li><span>{esc(lv.title)}</span><span>{dollars(lv.amount_cents)}</span></li>"
        for lv in view.levels
    )
    pending = "".join(
        f"<div>table {esc(p.table)} seat {p.seat}: {dollars(p.amount_cents)}</div>"
        for p in view.pending
    )
    word = "LINK CLOSED" if view.shown == "closed" else "LINK DOWN"
    script = ""
    if live:
        code = _resource("page.js").replace("__LINK__", json.dumps(view.link_id))
        script = f"<script>\n{code.replace('__TIMEOUT_MS__', str(view.timeout_ms))}</script>"
    return page.substitute(
        title=esc(view.title),
        version=view.version,
        amount=dollars(view.amount_cents),
        levels=levels,
        pending_hidden="" if view.pending else " hidden",
        pending_rows=pending,
        down_hidden=" hidden" if view.shown == "up" else "",
        down_word=word,
        down_reason=esc(view.reason or ""),
        script=script,
    )


class SignServer:
    """The sign's web server: `/`, `/links/{id}`, `/links/{id}/events`, `/links/{id}/view`."""

    def __init__(self, board: SignBoard, host: str, port: int) -> None:
        self.board = board
        self.host, self.port = host, port
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/", self._index),
                web.get("/links/{link_id}", self._page),
                web.get("/links/{link_id}/view", self._view),
                web.get("/links/{link_id}/events", self._events),
            ]
        )
        self.started = asyncio.Event()
        self._stopping = asyncio.Event()

    def _link(self, request: web.Request) -> str:
        link_id = request.match_info["link_id"]
        if link_id not in self.board.links:
            raise web.HTTPNotFound(text=f"no link {link_id} here\n")
        return link_id

    async def _index(self, request: web.Request) -> web.Response:
        items = "".join(
            f'<li><a href="/links/{html.escape(k)}">{html.escape(t)}</a></li>'
            for k, (t, _) in sorted(self.board.links.items())
        )
        return web.Response(
            text=f"<!doctype html><title>Links</title><ul>{items}</ul>", content_type="text/html"
        )

    async def _page(self, request: web.Request) -> web.Response:
        view = self.board.view(self._link(request))
        return web.Response(text=render_page(view, live=True), content_type="text/html")

    async def _view(self, request: web.Request) -> web.Response:
        view = self.board.view(self._link(request))
        return web.Response(text=view.model_dump_json(), content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        link_id = self._link(request)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        changed = self.board.watch(link_id)
        try:
            while not self._stopping.is_set():
                view = self.board.view(link_id)
                await response.write(f"data: {view.model_dump_json()}\n\n".encode())
                changed.clear()
                # A heartbeat at least: the view may have timed out to LINK DOWN.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), HEARTBEAT_S)
            return response
        finally:
            self.board.unwatch(link_id, changed)

    async def serve(self) -> None:
        # A stopping controller does not wait on the signs still watching (60 s by default).
        runner = web.AppRunner(
            self.app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            self.started.set()
            await asyncio.Event().wait()
        finally:
            self._stopping.set()
            self.board.wake_all()
            await runner.cleanup()
