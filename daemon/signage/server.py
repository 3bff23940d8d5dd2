"""The signage web server: public MQTT topics in, a live page out (server-sent events).

One aiohttp application per table. A background task subscribes with aiomqtt to the table's public
topics only (:func:`public_topics`: status, round, results, settlements, scoreboard, info, devices/+;
never ``floor/``, ``alarms`` or ``cmd/``), feeds every message into a
:class:`~daemon.signage.view.SignageView` and wakes the browsers. It reconnects on its own with the
one reconnect backoff of tablesense (:class:`drivers.backoff.Backoff`: exponential from 0.2 s, full
jitter, never more than 5 s, so a returning broker is used within seconds). Until it first connects the
page says "connecting"; once connected, losing the broker shows "feed offline" until it is back.

HTTP routes:
    ``GET /``            the page (static/index.html; plain HTML/CSS/JS, no third-party code);
                         ``?lang=en|zh-Hans|zh-Hant`` chooses the display's language (default: the table
                         config's ``[signage] language`` from the info message), ``?operator=1`` adds
                         the technician's detail (feed and device states, topic prefix)
    ``GET /static/...``  app.js, i18n.js, style.css
    ``GET /favicon.ico`` the page's icon
    ``GET /state``       the display model as JSON (same as each SSE event)
    ``GET /events``      ``text/event-stream``: an ``event: state`` with the whole display model on
                         connect and after every change (coalesced), a comment line every 15 s.

:func:`start_signage` runs it inside another program's event loop (``tablesense demo`` uses it).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import aiomqtt
from aiohttp import web

from tablesense.daemon.broker_auth import BrokerAuth
from tablesense.daemon.httpserve import serve_app
from tablesense.daemon.logging import get_logger
from tablesense.daemon.resources import data_path
from tablesense.daemon.signage.view import SignageView
from tablesense.drivers.backoff import Backoff
from tablesense.drivers.waits import cancel_and_wait, wait_at_most

__all__ = ["SignageServer", "public_topics", "start_signage"]

log = get_logger(component="signage")

STATIC = data_path("daemon", "signage", "static")  # package data (importlib.resources)
KEEPALIVE_S = 15.0
"""Seconds between SSE comment lines, so proxies and the browser keep the stream open."""


def public_topics(prefix: str, table: str) -> list[str]:
    """The subscription filters of the display, e.g. ``tablesense/T1/round``.

    Only topics signage may read (the information barrier, docs/security.md): no ``floor/`` topic, no
    ``alarms`` (signage shows no alarms), no ``cmd/``, and no multi-level wildcard.
    """
    base = f"{prefix}/{table}"
    return [f"{base}/{s}" for s in ("status", "round", "results", "settlements", "scoreboard", "info",
                                     "devices/+")]


class SignageServer:
    """The display of one table: MQTT subscriber task plus aiohttp app.

    Args:
        broker_host / broker_port: the MQTT broker.
        table: the table id. prefix: the topic prefix (default ``tablesense``).
        backoff_min / backoff_max: reconnect delay bounds in seconds (:class:`drivers.backoff.Backoff`:
            the first failure's ceiling and the longest delay; exponential, full jitter).
        info: a ``tablesense.table_info`` payload (:func:`daemon.signage.info.table_info`) shown until
            one arrives on ``{prefix}/{table}/info``.
        auth: TLS context and user name/password for the broker (:mod:`daemon.broker_auth`; the
            production broker's ``signage-<table>`` user may read exactly :func:`public_topics`).
        rng: random source of the backoff's jitter (tests pass a seeded or recording one).

    Raises:
        ValueError: unless ``0 < backoff_min <= backoff_max``.
    """

    def __init__(self, broker_host: str, broker_port: int, table: str, prefix: str = "tablesense",
                 backoff_min: float = 0.2, backoff_max: float = 5.0,
                 info: dict[str, Any] | None = None, auth: BrokerAuth | None = None,
                 rng: random.Random | None = None) -> None:
        self.auth = auth or BrokerAuth()
        self.broker_host = broker_host
        self.broker_port = broker_port
        self.table = table
        self.prefix = prefix
        self.backoff = Backoff(backoff_min, backoff_max, rng=rng)
        self.view = SignageView(table, prefix)
        if info is not None:
            self.view.handle("info", info)
        self._changed = asyncio.Condition()
        self._closing = False
        self._mqtt_task: asyncio.Task[None] | None = None

    # --- MQTT side --------------------------------------------------------------------------------

    def _wake(self, sent: int) -> bool:
        return self.view.version != sent or self._closing

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _suffix(self, topic: str) -> str | None:
        base = f"{self.prefix}/{self.table}/"
        return topic[len(base):] if topic.startswith(base) else None

    async def handle_message(self, topic: str, payload: bytes | bytearray | str) -> None:
        """Apply one MQTT message. Malformed JSON, or a message of the wrong shape, is counted (the view's
        ``rejected``), logged and skipped."""
        suffix = self._suffix(topic)
        if suffix is None or suffix.startswith("floor/"):
            return
        try:
            data = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            self.view.rejected += 1
            self.view.version += 1
            log.warning("signage_message_rejected", topic=topic, reason="not JSON", bytes=len(payload))
            await self._notify()
            return
        before = self.view.rejected
        if self.view.handle(suffix, data):
            await self._notify()
        elif self.view.rejected != before:
            log.warning("signage_message_rejected", topic=topic, reason="not the message shape of this topic",
                        rejected=self.view.rejected)

    async def run_mqtt(self) -> None:
        """Subscribe and follow the table until cancelled; reconnect with backoff on any broker error."""
        backoff = self.backoff
        while not self._closing:
            try:
                async with aiomqtt.Client(self.broker_host, self.broker_port, keepalive=10,
                                          timeout=5, **self.auth.client_kwargs()) as client:
                    for topic in public_topics(self.prefix, self.table):
                        await client.subscribe(topic, qos=1)
                    backoff.reset()
                    self.view.set_broker("connected")
                    await self._notify()
                    async for message in client.messages:
                        payload = message.payload
                        if not isinstance(payload, bytes | bytearray | str):
                            self.view.rejected += 1
                            continue
                        await self.handle_message(message.topic.value, payload)
            except (aiomqtt.MqttError, OSError) as exc:
                if not self._closing:
                    log.warning("signage_broker_unreachable", broker=f"{self.broker_host}:{self.broker_port}",
                                error=str(exc), attempt=backoff.failures)
            if self._closing:
                break
            if self.view.broker == "connected":  # never connected yet: the page keeps saying "connecting"
                self.view.set_broker("disconnected")
                await self._notify()
            await asyncio.sleep(backoff.next_delay())

    # --- HTTP side --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application (routes above). Its shutdown stops the MQTT task; start that task with
        :meth:`start_mqtt` once the address is bound (:func:`start_signage` does)."""
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/state", self._state)
        app.router.add_get("/events", self._events)
        app.router.add_get("/favicon.ico", self._favicon)
        app.router.add_static("/static/", STATIC, show_index=False)
        app.on_shutdown.append(self._on_shutdown)
        return app

    def start_mqtt(self) -> None:
        """Start following the broker in the running loop (once)."""
        if self._mqtt_task is None:
            self._mqtt_task = asyncio.create_task(self.run_mqtt(), name=f"signage-mqtt-{self.table}")

    async def _on_shutdown(self, _app: web.Application) -> None:
        self._closing = True
        await self._notify()
        if self._mqtt_task is not None and await cancel_and_wait([self._mqtt_task]):
            log.error("signage_mqtt_task_stuck", table=self.table,
                      message="the broker task did not end within 10 s of the shutdown; left behind")

    async def _index(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def _favicon(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "favicon.ico", headers={"Cache-Control": "max-age=86400",
                                                                 "Content-Type": "image/x-icon"})

    async def _state(self, _request: web.Request) -> web.Response:
        return web.json_response(self.view.to_dict(), headers={"Cache-Control": "no-store"})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        sent = -1
        try:
            await resp.write(b"retry: 1000\n\n")
            while not self._closing:
                if self.view.version != sent:
                    sent = self.view.version
                    data = json.dumps(self.view.to_dict(), separators=(",", ":"))
                    await resp.write(f"event: state\ndata: {data}\n\n".encode())
                    continue
                async with self._changed:
                    try:
                        await wait_at_most(self._changed.wait_for(partial(self._wake, sent)), KEEPALIVE_S)
                    except TimeoutError:
                        await resp.write(b": keepalive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


async def start_signage(broker_host: str, broker_port: int, table: str, prefix: str = "tablesense",
                        listen: str = "127.0.0.1:8080", info: dict[str, Any] | None = None,
                        auth: BrokerAuth | None = None) -> tuple[str, Callable[[], Awaitable[None]]]:
    """Start the signage server in the running event loop.

    ``listen`` is ``HOST:PORT`` (port 0 picks a free port); ``info`` is an optional table-info payload
    (:func:`daemon.signage.info.table_info` of the table's config); ``auth`` the broker's TLS and
    credentials (:class:`daemon.broker_auth.BrokerAuth`, default plain and anonymous). Returns
    ``(url, stop)``: the page's URL, e.g. ``http://127.0.0.1:8080/``, and a coroutine function that
    stops the server and its MQTT task.

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``.
        OSError: the address cannot be bound (e.g. the port is in use).
    """
    server = SignageServer(broker_host, broker_port, table, prefix, info=info, auth=auth)
    url, stop = await serve_app(server.app(), listen, 8080)
    server.start_mqtt()
    return url, stop
