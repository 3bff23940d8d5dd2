"""`tablesense demo` starts the signage display, prints its URL in the banner, and the page it serves shows
the daemon's own scoreboard and table info (limits without --config); `--no-signage` skips it."""

from __future__ import annotations

import asyncio
import io
import json
import re
from typing import Any

import aiohttp
import pytest

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.cli import main
from tablesense.daemon.commands.demo import run_demo

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]

URL = re.compile(r"^tablesense demo: table demo-baccarat .*signage display on (http://127\.0\.0\.1:\d+/)$",
                 re.M)


async def _state(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url + "state") as resp:
        assert resp.status == 200
        data: dict[str, Any] = await resp.json()
        return data


async def test_demo_prints_a_signage_url_that_serves_the_page_with_scoreboard_and_limits() -> None:
    buf = io.StringIO()
    demo = asyncio.create_task(run_demo("baccarat", 8, 3, out=buf, pace=0.03))
    try:
        async with asyncio.timeout(30):
            while (m := URL.search(buf.getvalue())) is None:
                assert not demo.done(), buf.getvalue()
                await asyncio.sleep(0.02)
        url = m.group(1)
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                page = await resp.text()
                assert resp.status == 200 and resp.content_type == "text/html"
            assert 'data-testid="big-road"' in page and "<script" in page
            async with asyncio.timeout(60):  # the daemon's retained info and a first round's roads arrive
                while True:
                    state = await _state(session, url)
                    sb = state.get("scoreboard") or {}
                    if state["scoreboard_source"] == "daemon" and sb.get("bead_plate"):
                        break
                    await asyncio.sleep(0.05)
        assert state["table"] == "demo-baccarat" and state["game"] == "baccarat"
        assert state["wagers_source"] == "info"
        assert all(w["limits"] for w in state["wagers"]) and state["wagers"]
        assert sb["stats"]["rounds"] == len(sb["bead_plate"]) >= 1
        lines = await asyncio.wait_for(demo, 60)
    finally:
        if not demo.done():
            demo.cancel()
            await asyncio.gather(demo, return_exceptions=True)
    assert "8 rounds settled" in "\n".join(lines)
    async with aiohttp.ClientSession() as session:  # stopped with the demo
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(url, timeout=aiohttp.ClientTimeout(total=5))


def test_no_signage_prints_no_url_and_bad_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-ui", "--no-signage", "--rounds", "1", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tablesense demo: table demo-baccarat (baccarat)") and "signage" not in out
    assert main(["demo", "--signage-port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "--signage-port must be 0..65535" in err and len(err.strip().splitlines()) == 1


async def test_the_uth_demo_leaves_each_hand_on_the_display_while_the_next_is_open_for_betting() -> None:
    """At a watching pace the demo's dealer keeps betting open for 8 cards' time before no-more-bets, so
    the display shows each UTH hand (dealt face down, revealed at once) with its Ultimate Pairs results
    for that long, numbered by its deck ("hand"), instead of clearing it within milliseconds."""
    pace = 0.1
    buf = io.StringIO()
    demo = asyncio.create_task(run_demo("uth", 3, 5, out=buf, pace=pace))
    uth_url = re.compile(r"signage display on (http://127\.0\.0\.1:\d+/)$", re.M)
    shown: list[tuple[float, bool]] = []  # (time, a revealed hand is on the display)
    try:
        async with asyncio.timeout(30):
            while (m := uth_url.search(buf.getvalue())) is None:
                assert not demo.done(), buf.getvalue()
                await asyncio.sleep(0.02)
        loop = asyncio.get_running_loop()
        async with aiohttp.ClientSession() as session, session.get(m.group(1) + "events") as resp:
            pending = b""
            while not demo.done():
                try:
                    chunk = await asyncio.wait_for(resp.content.readany(), 1.0)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                pending += chunk
                while b"\n\n" in pending:
                    event, pending = pending.split(b"\n\n", 1)
                    if not event.startswith(b"event: state"):
                        continue
                    state = json.loads(event.split(b"data: ", 1)[1])
                    assert state["game"] in (None, "uth") and state["numbering"] == (
                        "hand" if state["game"] else "round")
                    seen = any(b["cards"] for b in state["boxes"])  # seat cards: only after the reveal
                    shown.append((loop.time(), seen))
        await asyncio.wait_for(demo, 60)
    finally:
        if not demo.done():
            demo.cancel()
            await asyncio.gather(demo, return_exceptions=True)
    spans, start = [], None
    for t, seen in shown:
        if seen and start is None:
            start = t
        elif not seen and start is not None:
            spans.append(t - start)
            start = None
    assert len(spans) >= 2, shown  # hands 1 and 2 each gave way to the next hand's deal
    assert min(spans) >= 4 * pace, spans  # the betting pause is 8 * pace; never cleared at once
