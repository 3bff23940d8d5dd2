"""The floor page in a real headless Chromium (Debian's package) driven by Playwright: two tables published
the contract's way on a real Mosquitto, stored by ``tablesense floor`` (a subprocess) on PostgreSQL, the
page served by the same command (``--http``). Assertions are on what the pit boss sees: each table's online
state, game, shoe and round, open alarms with the held one first, today's handle, win and hold beside the
theoretical hold, updated live as rounds are dealt and when a table goes offline.

Set TABLESENSE_SCREENSHOTS=docs/screenshots to refresh docs/screenshots/floor.png.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from floor_support import ContractTable, pg_url

from tablesense.daemon.broker import MosquittoBroker, free_port, mosquitto_binary
from tablesense.daemon.messages import AlarmMessage, RoundState

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[1]
TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
WAIT_MS = 30_000  # how long Playwright waits for the page to show something (a wait, not a speed check)

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (Debian's 'chromium')"),
    pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed"),
    pytest.mark.timeout(180),
]

from playwright.async_api import async_playwright, expect  # noqa: E402


@pytest.fixture
def broker(tmp_path: Path) -> AsyncIterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "broker", persistence=False) as b:
        yield b  # type: ignore[misc]


async def test_floor_page_live(tmp_path: Path, broker: MosquittoBroker) -> None:
    port = free_port()
    async with pg_url() as url:
        proc = subprocess.Popen([TABLESENSE, "floor", "--broker", broker.url, "--database", url, "--http",
                                 f"127.0.0.1:{port}", "--client-id", "floor-page"],
                                stdout=(tmp_path / "floor.log").open("wb"), stderr=subprocess.STDOUT)
        tables = [ContractTable(broker.host, broker.port, "bac-01", seed=1),
                  ContractTable(broker.host, broker.port, "bac-02", seed=2)]
        for t in tables:
            t.live_clock = True  # today's gaming day
        try:
            for t in tables:
                await t.start()
                await t.open_table()
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                   args=CHROMIUM_ARGS)
                page = await browser.new_page(viewport={"width": 1920, "height": 1080})
                for _ in range(60):
                    try:
                        await page.goto(f"http://127.0.0.1:{port}/")
                        break
                    except Exception:
                        await asyncio.sleep(0.25)
                rows = page.get_by_test_id("table-row")
                await expect(rows).to_have_count(2, timeout=WAIT_MS)
                await expect(page.get_by_test_id("feed-status")).to_have_text("feed live", timeout=WAIT_MS)
                for _ in range(3):
                    await tables[0].deal_round()
                await tables[1].deal_round()
                one = page.locator('[data-testid="table-row"][data-table="bac-01"]')
                await expect(one.get_by_test_id("round")).to_have_text(re.compile(r"^3 · complete"),
                                                                       timeout=WAIT_MS)
                await expect(one.get_by_test_id("handle")).to_have_text("315.00", timeout=WAIT_MS)
                await expect(one.get_by_test_id("table-state")).to_have_text("online")
                await expect(one.get_by_test_id("theo")).to_have_text(re.compile(r"^\d+\.\d\d$"))
                # bac-02 holds its round: it moves to the top, the held alarm first
                two = tables[1]
                await two.emit("alarms", AlarmMessage(table="bac-02", ts=two.stamp(), shoe=1, round=2,
                                                      alarm_id="1.1", code="CUT_CARD", severity="info",
                                                      text="cut card out: one more round", held=False))
                await two.emit("alarms", AlarmMessage(table="bac-02", ts=two.stamp(), shoe=1, round=2,
                                                      alarm_id="1.2", code="CARD_NOT_IN_SHOE",
                                                      severity="critical", held=True,
                                                      text="a card the shoe cannot hold: round held"))
                await two.emit("alarms", AlarmMessage(table="bac-02", ts=two.stamp(), shoe=1, round=2,
                                                      alarm_id="1.3", code="PAST_POSTING",
                                                      severity="critical",
                                                      text="spot 3 changed after lock", seat="3", spot="3"))
                await two.emit("round", RoundState(table="bac-02", ts=two.stamp(), shoe=1, round=2,
                                                   game="baccarat", phase="dealing", held=True,
                                                   hold_codes=("CARD_NOT_IN_SHOE",)), retain=True)
                await expect(rows.first).to_have_attribute("data-table", "bac-02", timeout=WAIT_MS)
                alarms = rows.first.get_by_test_id("alarm")
                try:
                    await expect(alarms).to_have_count(2, timeout=WAIT_MS)  # the info alarm is not shown
                except AssertionError:
                    raise AssertionError(await page.evaluate("fetch('/state').then(r => r.text())")) from None
                await expect(alarms.first).to_have_attribute("data-code", "CARD_NOT_IN_SHOE")
                await expect(alarms.nth(1)).to_have_attribute("data-code", "PAST_POSTING")
                for path in [tmp_path / "floor.png",
                             *([Path(os.environ["TABLESENSE_SCREENSHOTS"]) / "floor.png"]
                               if os.environ.get("TABLESENSE_SCREENSHOTS") else [])]:
                    full = path if path.is_absolute() else ROOT / path
                    full.parent.mkdir(parents=True, exist_ok=True)
                    await page.screenshot(path=str(full))
                    assert full.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                # bac-01 goes away: offline, live
                await tables[0].stop()
                await expect(one.get_by_test_id("table-state")).to_have_text("offline", timeout=WAIT_MS)
                await browser.close()
        finally:
            for t in tables:
                await t.stop()
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(20)
        assert rc == 0, (tmp_path / "floor.log").read_text()[-2000:]
