"""The floor page: every table on one screen, live (``tablesense floor --http 127.0.0.1:PORT``).

Per table: online state, game, current shoe and round (and phase), open alarms (held rounds first,
then by severity; the table's raised alarms of its current shoe and the floor's own alarms about it),
today's handle, house win, hold % beside the theoretical hold % (gaming day: :class:`.GamingDay`).
Tables with a held round come first. Plain HTML/CSS/JS (static/), no third-party code.

HTTP routes:
    ``GET /``            the page
    ``GET /static/...``  floor.js, floor.css
    ``GET /state``       the page model as JSON (shape in docs/floor.md)
    ``GET /events``      ``text/event-stream``: ``event: state`` with the whole model on connect and after
                         every committed batch (PostgreSQL ``LISTEN``; SQLite: checked every second)

It reads the database only (its own connection), so it can run in any floor process or alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tablesense.daemon.floor.accounting import GamingDay, _pct, money, money_exact, today_by_table
from tablesense.daemon.floor.consumer import NOTIFY_CHANNEL
from tablesense.daemon.floor.store import Database, DatabaseError, open_database
from tablesense.daemon.httpserve import serve_app
from tablesense.daemon.logging import get_logger
from tablesense.daemon.resources import data_path
from tablesense.drivers.waits import wait_at_most

__all__ = ["FloorPage", "page_model", "start_floor_page"]

log = get_logger(component="floor")
STATIC = data_path("daemon", "floor", "static")  # package data (importlib.resources)
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
MAX_ALARM_TEXT = 400
"""Characters of an alarm's text the page model carries (the page shows 80; a table's alarm text is at
most a few hundred): every browser is sent the whole model after every batch."""


async def page_model(db: Database, gaming_day: GamingDay, now: datetime | None = None) -> dict[str, Any]:
    """The page's model (docs/floor.md): ``gaming_day``, ``updated_at`` and ``tables`` (list)."""
    now = now or datetime.now(UTC)
    tables = await db.fetchall(
        "SELECT table_id, state, game, shoe, round, phase, held, last_message_at, currency, minor_unit, "
        "epoch, "
        "status_detail FROM tables ORDER BY table_id")
    alarm_rows = await db.fetchall(
        "SELECT a.table_id, a.alarm_id, a.code, a.severity, a.text, a.state, a.held, a.ts FROM alarms a "
        "JOIN tables t ON t.table_id = a.table_id AND a.shoe = t.shoe WHERE a.seq = (SELECT MAX(a2.seq) "
        "FROM alarms a2 WHERE a2.table_id = a.table_id AND a2.epoch = a.epoch AND a2.alarm_id = a.alarm_id)")
    floor_rows = await db.fetchall(
        "SELECT table_id, alarm_key, code, severity, text, raised_at FROM floor_alarms WHERE state = "
        "'raised'")
    today = await today_by_table(db, gaming_day, now)
    alarms: dict[str, list[dict[str, Any]]] = {}
    for table, alarm_id, code, severity, text, state, held, ts in alarm_rows:
        if state != "raised" or (severity == "info" and not held):
            continue
        alarms.setdefault(str(table), []).append(
            {"source": "table", "id": str(alarm_id)[:64], "code": str(code)[:64], "severity": severity,
             "text": str(text)[:MAX_ALARM_TEXT], "held": bool(held), "ts": ts})
    for table, key, code, severity, text, raised_at in floor_rows:
        alarms.setdefault(str(table), []).append(
            {"source": "floor", "id": key, "code": code, "severity": severity,
             "text": str(text)[:MAX_ALARM_TEXT], "held": False, "ts": raised_at})
    out = []
    # a floor alarm about a table that never stored a message (all it sent was quarantined) has a row too
    seen = {str(r[0]) for r in tables}
    tables = [*tables, *((t, None, None, None, None, None, False, None, None, None, None, "")
                         for t in sorted(set(alarms) - seen))]
    for (table, state, game, shoe, rnd, phase, held, last_at, currency, minor, epoch, detail) in tables:
        digits = int(minor) if minor is not None else 2
        f = today.get(str(table))
        mine = sorted(alarms.get(str(table), []),
                      key=lambda a: (not a["held"], _SEVERITY.get(str(a["severity"]), 3), str(a["ts"])))
        out.append({
            "table": table, "state": state or "unknown", "detail": detail or "", "game": game, "shoe": shoe,
            "round": rnd, "phase": phase, "held": bool(held), "last_message_at": last_at,
            "currency": currency, "epoch": epoch, "alarms": mine,
            "today": None if f is None else {
                "rounds": f.rounds, "handle": money(f.handle, digits),
                "house_win": money(f.house_win, digits),
                "hold_pct": _pct(f.hold), "theo_win": money_exact(f.theo, digits) if f.theo_handle else None,
                "theo_hold_pct": _pct(f.theo_hold), "void_rounds": f.void_rounds},
        })
    out.sort(key=lambda t: (not t["held"], not any(a["held"] for a in t["alarms"]), str(t["table"])))
    return {"gaming_day": gaming_day.of(now).isoformat(), "zone": gaming_day.zone,
            "start_hour": gaming_day.start_hour, "updated_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tables": out}


LISTEN_CONNECT_TIMEOUT = 5
"""Seconds the page's ``LISTEN`` connection may take to open (libpq ``connect_timeout``): beyond, the page
refreshes by polling and tries again."""


class FloorPage:
    """The aiohttp application of the page over its own :class:`Database` (``url``)."""

    def __init__(self, url: str, gaming_day: GamingDay, prefix: str = "tablesense",
                 poll: float = 1.0) -> None:
        self.url = url
        self.db = open_database(url)
        self.gaming_day = gaming_day
        self.prefix = prefix
        self.poll = poll
        self.version = 0
        self._model: dict[str, Any] | None = None
        self._changed = asyncio.Condition()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        """Rebuild the model; wake the browsers when it changed."""
        try:
            model = await page_model(self.db, self.gaming_day)
        except DatabaseError as exc:
            log.warning("floor_page_refresh_failed", error=str(exc))
            return
        except Exception as exc:  # the page goes on with the model it has (and tries again)
            log.error("floor_page_refresh_failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
            return
        stable = {k: v for k, v in model.items() if k != "updated_at"}
        old = {k: v for k, v in (self._model or {}).items() if k != "updated_at"}
        if stable != old:
            self._model = model
            self.version += 1
            async with self._changed:
                self._changed.notify_all()

    async def _follow(self) -> None:
        """Refresh on every committed batch (PostgreSQL LISTEN) or every ``poll`` seconds."""
        while not self._closing:
            if self.db.dialect == "postgresql":
                with contextlib.suppress(Exception):
                    await self._listen()
            await self.refresh()
            await asyncio.sleep(self.poll)

    async def _listen(self) -> None:
        import psycopg

        # bounded like the page's own connection: a server that accepts and never answers (a half-dead
        # database host) must not keep the page from polling instead
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                         connect_timeout=LISTEN_CONNECT_TIMEOUT) as conn:
            await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            await self.refresh()
            while not self._closing:
                # stop_after=1: the generator ends (and releases the connection) after each wake-up
                async for _n in conn.notifies(timeout=self.poll * 5, stop_after=1):
                    pass
                await self.refresh()
                await asyncio.sleep(0.2)  # coalesce bursts of batches

    def app(self) -> web.Application:
        """Routes in the module docstring."""
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/state", self._state)
        app.router.add_get("/events", self._events)
        app.router.add_static("/static/", STATIC, show_index=False)
        app.on_shutdown.append(self._on_shutdown)
        return app

    def start(self) -> None:
        """Start following the database (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="floor-page")

    async def _on_shutdown(self, _app: web.Application) -> None:
        self._closing = True
        async with self._changed:
            self._changed.notify_all()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.db.close()

    async def _index(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "floor.html", headers={"Cache-Control": "no-cache"})

    async def _state(self, _request: web.Request) -> web.Response:
        if self._model is None:
            await self.refresh()
        return web.json_response(self._model or {"tables": []}, headers={"Cache-Control": "no-store"})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        sent = -1
        try:
            await resp.write(b"retry: 1000\n\n")
            if self._model is None:
                await self.refresh()
            while not self._closing:
                if self.version != sent and self._model is not None:
                    sent = self.version
                    data = json.dumps(self._model, separators=(",", ":"))
                    await resp.write(f"event: state\ndata: {data}\n\n".encode())
                    continue
                async with self._changed:
                    try:
                        await wait_at_most(self._changed.wait(), 15)
                    except TimeoutError:
                        await resp.write(b": keepalive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


async def start_floor_page(url: str, listen: str, gaming_day: GamingDay, prefix: str = "tablesense"
                           ) -> tuple[str, Callable[[], Awaitable[None]]]:
    """Serve the floor page of the database ``url`` on ``listen`` (``HOST:PORT``, port 0: a free one).
    Returns ``(page url, stop)``. Raises ``ValueError`` (bad ``listen``) or ``OSError`` (cannot bind)."""
    page = FloorPage(url, gaming_day, prefix)
    page_url, stop = await serve_app(page.app(), listen, 8090)
    page.start()
    return page_url, stop
