"""The web pages (signage display, floor page) served on a loopback address answer only requests that
name a loopback host: a hostile web page whose name resolves to 127.0.0.1 (DNS rebinding) cannot make a
browser on the machine read them. RFC 9110 §7.2, §15.5.20."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.httpserve import serve_app
from tablesense.daemon.signage.server import start_signage


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "mosquitto", persistence=False) as b:
        yield b


def _app() -> web.Application:
    app = web.Application()

    async def state(_request: web.Request) -> web.Response:
        return web.json_response({"handle": 123456})

    app.router.add_get("/state", state)
    return app


async def _get(url: str, host: str | None) -> tuple[int, str]:
    headers = {"Host": host} if host is not None else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


@pytest.mark.parametrize("listen", ["127.0.0.1:0"])
async def test_a_page_on_loopback_refuses_a_host_that_is_not_loopback(listen: str) -> None:
    url, stop = await serve_app(_app(), listen, 8080)
    port = url.rstrip("/").rsplit(":", 1)[1]
    try:
        for host in (None, f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"127.0.0.2:{port}",
                     "[::1]:8080"):
            status, body = await _get(url + "state", host)
            assert (status, body) == (200, '{"handle": 123456}'), host
        for host in (f"rebind.attacker.example:{port}", "rebind.attacker.example", f"10.0.0.5:{port}",
                     "localhost.attacker.example", "", "[::ffff:10.0.0.1]:80"):
            status, body = await _get(url + "state", host)
            assert status == 421 and "handle" not in body and "loopback" in body, host
    finally:
        await stop()


async def test_a_page_bound_to_every_address_answers_any_host() -> None:
    """Bound beyond loopback the operator chose who reaches it (a display on the table's network)."""
    url, stop = await serve_app(_app(), "0.0.0.0:0", 8080)
    port = url.rstrip("/").rsplit(":", 1)[1]
    try:
        status, _ = await _get(f"http://127.0.0.1:{port}/state", f"display-3.casino.example:{port}")
        assert status == 200
    finally:
        await stop()


@pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed")
async def test_the_signage_page_on_loopback_refuses_a_rebound_host(broker: MosquittoBroker) -> None:
    url, stop = await start_signage(broker.host, broker.port, "T1", "ts-host-check", "127.0.0.1:0")
    try:
        assert (await _get(url + "state", None))[0] == 200
        status, body = await _get(url + "state", "rebind.attacker.example")
        assert status == 421 and body.startswith("misdirected request")
    finally:
        await stop()
