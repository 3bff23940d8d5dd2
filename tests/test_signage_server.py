"""The signage server without a browser: HTTP routes, the SSE stream, MQTT in, the console script."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
import pytest

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.messages import RoundState, TableStatus, encode_message
from tablesense.daemon.signage.server import start_signage

pytestmark = pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed")
ROOT = Path(__file__).resolve().parents[1]
TS = "2026-11-29T12:00:00Z"


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    with MosquittoBroker(tmp_path / "mosquitto", persistence=False) as b:
        yield b


async def state_until(http: aiohttp.ClientSession, url: str, ok: Callable[[dict[str, Any]], bool],
                      tries: int = 400) -> dict[str, Any]:
    """Poll GET /state until ``ok`` holds (a wait for the broker round trip, not a speed check)."""
    state: dict[str, Any] = {}
    for _ in range(tries):
        async with http.get(url + "state") as r:
            state = await r.json()
        if ok(state):
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"state never matched: {state}")


async def test_routes_sse_and_malformed_input(broker: MosquittoBroker) -> None:
    prefix, table = "ts-server-1", "T9"
    url, stop = await start_signage(broker.host, broker.port, table, prefix, "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                assert r.status == 200 and "data-testid=\"offline-notice\"" in await r.text()
            async with http.get(url + "static/app.js") as r:
                body = await r.text()
                assert r.status == 200 and "EventSource" in body and "http" not in body.split("SVG_NS")[0]
            async with http.get(url + "static/../server.py") as r:
                assert r.status in (403, 404)
            await state_until(http, url, lambda s: s["broker"] == "connected")
            async with aiomqtt.Client(broker.host, broker.port) as client:
                base = f"{prefix}/{table}"
                await client.publish(f"{base}/status", b"{not json", qos=1)
                await client.publish(f"{base}/round", b'{"schema": "tablesense.round", "phase": 3}', qos=1)
                await client.publish(f"{base}/floor/rounds", b'{"secret": "HOLE-CARD-AS"}', qos=1)
                await client.publish(f"{base}/status", encode_message(
                    TableStatus(table=table, ts=TS, state="online")), qos=1, retain=True)
                await client.publish(f"{base}/round", encode_message(
                    RoundState(table=table, ts=TS, shoe=1, round=3, game="uth", phase="betting")), qos=1)
                state = await state_until(http, url, lambda s: s["phase"] == "betting")
            assert state["table_status"] == "online" and state["game_label"] == "Ultimate Texas Hold 'Em"
            assert state["rejected"] == 2  # the payload that is not JSON; the round message of a wrong shape
            assert "HOLE-CARD-AS" not in json.dumps(state)
            async with http.get(url + "events") as r:
                assert r.headers["Content-Type"].startswith("text/event-stream")
                seen = b""
                while b"\n\n" not in seen.split(b"event: state", 1)[-1]:
                    seen += await r.content.readany()
                event = seen.split(b"event: state\ndata: ", 1)[1].split(b"\n\n", 1)[0]
                assert json.loads(event)["phase"] == "betting"
    finally:
        await stop()


def test_console_script_serves_and_stops_on_sigterm(broker: MosquittoBroker) -> None:
    exe = Path(sys.executable).with_name("tablesense")
    config = str(ROOT / "deploy/examples/baccarat.toml")
    proc = subprocess.Popen([str(exe), "signage", "--broker", broker.url, "--table", "bac-01",
                             "--listen", "127.0.0.1:0", "--config", config],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("tablesense signage: table bac-01 on http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1].strip()

        async def check() -> dict[str, Any]:
            async with aiohttp.ClientSession() as http:
                return await state_until(http, url, lambda s: s["broker"] == "connected")

        state = asyncio.run(check())
        assert state["wagers_source"] == "info"
        assert any(w["bet"] == "perfect_pairs" and w["limits"] == "€5 – €200" for w in state["wagers"])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_port_in_use_is_a_one_line_error(broker: MosquittoBroker) -> None:
    exe = Path(sys.executable).with_name("tablesense")
    done = subprocess.run([str(exe), "signage", "--broker", broker.url, "--table", "T1",
                           "--listen", f"127.0.0.1:{broker.port}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("tablesense: signage: cannot listen on 127.0.0.1:") and \
        len(done.stderr.strip().splitlines()) == 1


def test_page_loads_nothing_from_elsewhere() -> None:
    """Plain HTML/CSS/JS served by tablesense: every src/href is local and the script fetches only /events."""
    import re

    static = ROOT / "daemon/signage/static"
    html = (static / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sorted(refs) == ["/favicon.ico", "/static/app.js", "/static/i18n.js", "/static/style.css"]
    for name in ("app.js", "i18n.js"):
        js = (static / name).read_text()
        loads = re.findall(r"(?:fetch|EventSource|XMLHttpRequest|import)\s*\(?\s*[\"']([^\"']+)", js)
        assert loads == (["/events"] if name == "app.js" else [])
        assert "http://" not in js.replace('"http://www.w3.org/2000/svg"', "") and "https://" not in js
    css = (static / "style.css").read_text()
    assert "@import" not in css and "url(" not in css


async def test_feed_state_is_connecting_until_the_broker_was_reached_once(broker: MosquittoBroker) -> None:
    """A display whose broker cannot be reached yet says "connecting", not "disconnected" (the page's
    "Feed offline" alarm); only losing a broker it had makes it "disconnected"."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    url, stop = await start_signage("127.0.0.1", dead, "T1", "ts-server-2", "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http:
            await asyncio.sleep(1.5)  # several failed attempts (backoff from 0.2 s)
            async with http.get(url + "state") as r:
                state = await r.json()
            assert (state["broker"], state["received"], state["table_status"]) == ("connecting", 0, "unknown")
            async with http.get(url + "favicon.ico") as r:
                assert r.status == 200 and r.content_type == "image/x-icon"
    finally:
        await stop()
    url, stop = await start_signage(broker.host, broker.port, "T1", "ts-server-2", "127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http:
            await state_until(http, url, lambda s: s["broker"] == "connected")
            broker.stop()
            state = await state_until(http, url, lambda s: s["broker"] != "connected")
            assert state["broker"] == "disconnected"
            broker.start()
            await state_until(http, url, lambda s: s["broker"] == "connected")
    finally:
        await stop()


async def test_stopping_right_after_start_never_hangs(broker: MosquittoBroker) -> None:
    """Stopped while its broker task is still subscribing, the server ends: aiomqtt's ``subscribe``
    (``asyncio.wait_for`` on Python 3.11) can swallow the cancellation when the SUBACK arrives in the
    same loop turn, and the task then waited for messages for ever (``drivers.waits.cancel_and_wait``
    cancels it again). Before, about one stop in three of these hung."""
    loop = asyncio.get_running_loop()
    slowest = 0.0
    for _ in range(20):
        url, stop = await start_signage(broker.host, broker.port, "T1", "ts-server-stop", "127.0.0.1:0")
        async with aiohttp.ClientSession() as http, http.get(url + "state") as r:
            assert r.status == 200
        began = loop.time()
        stopping = asyncio.ensure_future(stop())
        await asyncio.wait({stopping}, timeout=8)
        slowest = max(slowest, loop.time() - began)
        assert stopping.done(), "stop() hung"
    assert slowest < 5  # a cancellation swallowed once is cancelled again after 0.5 s
