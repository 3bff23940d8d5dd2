"""Take the signage screenshots in this folder from scripted shoes, never by hand.

    .venv/bin/python docs/screenshots/make.py [--out docs/screenshots] [--game baccarat|blackjack|uth]

For each game: a private Mosquitto, the simulated shoe and bet pads
(``tablesense.simulators.dealer.SimTable``) dealing the scripted cards below with fixed wagers,
``tablesense run`` (the real daemon, a subprocess) on the example config of the game (deploy/examples/,
rewired to the simulated devices), the signage server (``start_signage``) and Debian's Chromium
(``/usr/bin/chromium``, driven by Playwright; never ``playwright install``) at 1920x1080. Each picture
is taken once the page shows the last scripted round, while the next round is open for betting:

* ``signage-baccarat.png``: 24 real rounds (tests/data/real-shoes/, Ezugi table 32100) and a scripted
  25th (Player 10♥ 10♥ 8♠ against Banker 6♦ Q♣: a Player Perfect Pair and 10-rank cards), so the five
  roads, the statistics, the pair banner, a three-card hand, the odds lines, limits and the commission
  rule are all on screen; ``signage-baccarat-zh-Hans.png`` / ``-zh-Hant.png`` the same display in
  Simplified / Traditional Chinese (``?lang=``; fonts from Debian's fonts-noto-cjk);
* ``signage-blackjack.png``: five boxes, four with a Perfect Pairs wager: a Perfect, a Colored and a Mixed
  pair and a box without a pair; the dealer's up card only (the hole card is never public);
* ``signage-uth.png``: four seats after the reveal, dealer and board: A-K suited, A-A, a low pair and a
  losing Ultimate Pairs wager (paytable F).

Exit status 0 when every picture was written; the paths are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.async_api import Page, async_playwright, expect

from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.config import parse_config
from tablesense.daemon.signage.server import start_signage
from tablesense.simulators.dealer import SimTable, sim_config_toml

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
REAL_SHOE = ROOT / "tests" / "data" / "real-shoes" / "ezugi_queenco_32100_2022-11-28.jsonl"
TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
WAIT_MS = 30_000

BACCARAT_LAST = ["10H", "6D", "10H", "QC", "8S"]
"""Round 25: Player 10♥ 10♥ (0, a Perfect Pair) draws 8♠ -> 8; Banker 6♦ Q♣ stands on 6 (§ 631a.11)."""
SPARE = ["2C", "3D", "4H", "5S"]
"""Cards left in the shoe after the last round: the shoe is not over, the table stays open for betting."""
BACCARAT_WAGERS = {"1B": 10000, "1PP": 500, "2P": 5000, "2PP": 1000, "1DP": 500, "1HM": 500, "3B": 2000}

BLACKJACK_CARDS = ["8H", "QS", "10C", "7S", "KS", "8D", "QS", "9D", "7H", "6C", "5H"]
"""Boxes 1, 2, 3, 5 and the dealer, card by card: 8♥ 8♦ (Colored Pair), Q♠ Q♠ (Perfect Pair),
10♣ 9♦ (no pair), 7♠ 7♥ (Mixed Pair); dealer K♠ up, 6♣ in the hole; one more card (5♥) in play."""
BLACKJACK_WAGERS = {"B1": 2500, "PP1": 1000, "B2": 5000, "PP2": 500, "B3": 1000, "PP3": 500, "B5": 2000,
                    "PP5": 500}

UTH_CARDS = ["AS", "7H", "QC", "AD", "JS", "KS", "7D", "9D", "AH", "10H", "10S", "4C", "2D", "QH", "3S"]
"""Seats 1, 2, 4, 5 and the dealer, card by card, then the board: A♠ K♠ (A-K suited), 7♥ 7♦ (low pair),
Q♣ 9♦ (no line), A♦ A♥ (A-A); dealer J♠ 10♥; board 10♠ 4♣ 2♦ Q♥ 3♠."""
UTH_WAGERS = {"A1": 2000, "U1": 1000, "A2": 1000, "U2": 500, "A4": 5000, "U4": 500, "A5": 1000, "U5": 2500}


def baccarat_script() -> list[str]:
    """The 24 real rounds' cards in draw order, then round 25."""
    cards: list[str] = []
    for line in REAL_SHOE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            cards += json.loads(line)["cards"]
    return cards + BACCARAT_LAST + SPARE


async def wait_for(page: Page, game: str) -> None:
    """Until the page shows the last scripted round (and, for baccarat, its 25 roads' cells)."""
    if game == "baccarat":
        cells = page.locator('[data-testid="bead-plate"] [data-cell]')
        await expect(cells).to_have_count(25, timeout=WAIT_MS)
        await expect(page.get_by_test_id("pair-banner")).to_have_count(1, timeout=WAIT_MS)
    elif game == "blackjack":
        await expect(page.locator('[data-testid="box-pair"].hit')).to_have_count(3, timeout=WAIT_MS)
        await expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "complete",
                                                                     timeout=WAIT_MS)
    else:
        await expect(page.locator('[data-testid="box-pair"].hit')).to_have_count(3, timeout=WAIT_MS)
        await expect(page.get_by_test_id("card")).to_have_count(15, timeout=WAIT_MS)
    await expect(page.get_by_test_id("offline-notice")).to_be_hidden(timeout=WAIT_MS)
    await page.wait_for_timeout(300)  # the last SSE update painted


async def shoot(game: str, out: Path, tmp: Path) -> list[Path]:
    """Deal ``game``'s scripted rounds through the daemon and take its pictures; returns their paths."""
    if game == "baccarat":
        script, rounds = baccarat_script(), [None] * 24 + [BACCARAT_WAGERS]
        shots = [("signage-baccarat.png", ""), ("signage-baccarat-zh-Hans.png", "?lang=zh-Hans"),
                 ("signage-baccarat-zh-Hant.png", "?lang=zh-Hant")]
    elif game == "blackjack":
        script, rounds, shots = BLACKJACK_CARDS + SPARE, [BLACKJACK_WAGERS], [("signage-blackjack.png", "")]
    else:
        script, rounds, shots = UTH_CARDS + SPARE, [UTH_WAGERS], [("signage-uth.png", "")]
    written: list[Path] = []
    with MosquittoBroker(tmp / "broker", persistence=False) as broker:
        dev = tmp / "dev"
        text = sim_config_toml(game, urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                               host=broker.host, port=broker.port, journal=tmp / "journal")
        (tmp / "table.toml").write_text(text, encoding="utf-8")
        config = parse_config(text)
        url, stop_signage = await start_signage(broker.host, broker.port, config.table,
                                                config.mqtt.topic_prefix, "127.0.0.1:0")
        sim = SimTable(config, dev, seed=7, cards=script)
        await sim.start()
        with open(tmp / "daemon.log", "wb") as log:
            daemon = subprocess.Popen([TABLESENSE, "run", "--config", str(tmp / "table.toml")], stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            await sim.wait_host(30)
            for wagers in rounds:
                await sim.play_round(wagers, hits=1 if game == "blackjack" else None)
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                   args=["--no-sandbox", "--disable-gpu"])
                try:
                    page = await browser.new_page(viewport={"width": 1920, "height": 1080})
                    for name, query in shots:
                        await page.goto(url + query)
                        await wait_for(page, game)
                        path = out / name
                        await page.screenshot(path=str(path))
                        written.append(path)
                finally:
                    await browser.close()
        finally:
            daemon.send_signal(signal.SIGTERM)
            await asyncio.to_thread(daemon.wait, 15)
            await stop_signage()
            await sim.close()
    return written


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNGs")
    ap.add_argument("--game", choices=["baccarat", "blackjack", "uth"], action="append",
                    help="only this game (repeatable; default: all three)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for game in args.game or ["baccarat", "blackjack", "uth"]:
        with tempfile.TemporaryDirectory(prefix=f"tablesense-shots-{game}-") as tmp:
            for path in await shoot(game, args.out, Path(tmp)):
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
