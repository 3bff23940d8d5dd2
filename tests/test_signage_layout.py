"""Readable at 5 m, for every game and, for baccarat, every language: measured in Debian's Chromium at
1920x1080 from the rendered page's bounding boxes.

Each game is driven through a worst case (three-card hands of 10s, both pair banners, seven boxes or
seats with the longest paytable lines, a shoe whose roads run past the visible columns) with the
daemon's own messages on a Mosquitto the test owns, and at every step the page must have: every
player-facing text at least 28 px, cards at least 140 px high with their rank and suit inside the face,
road cells at least 28 px, no text clipped or outside its box, no panel overlapping another or beyond
the screen; and no element may move or change size when results arrive. The measured figures are printed
(``pytest -s``) as ``SIZES game language step {...}``; with ``TABLESENSE_LAYOUT_SHOTS=DIR`` a picture of
every measured step is kept in DIR.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import msgspec
import pytest
from signage_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LAYOUT_JS,
    MEASURE_JS,
    NO_CHROMIUM,
    TS,
    VIEWPORT,
    WAIT_MS,
    TablePublisher,
    readability_problems,
    sizes,
)

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import TableConfig, load_config, parse_config
from tablesense.daemon.messages import (
    BaccaratOutcome,
    BoxResult,
    DeviceStatus,
    PublicCard,
    RoundResults,
    RoundState,
    SettlementMessage,
    TableStatus,
)
from tablesense.daemon.scoreboard import Scoreboard
from tablesense.daemon.signage.info import table_info
from tablesense.daemon.signage.server import start_signage

ROOT = Path(__file__).resolve().parents[1]
EZUGI = ROOT / "tests" / "data" / "real-shoes" / "ezugi_queenco_32100_2022-11-28.jsonl"

pytestmark = [pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM),
              pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed")]

from playwright.async_api import Page, async_playwright, expect  # noqa: E402


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    with MosquittoBroker(tmp_path / "mosquitto", persistence=False) as b:
        yield b


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield await browser.new_page(viewport=VIEWPORT)
        finally:
            await browser.close()


async def settle_page(page: Page, version_before: str | None = None) -> None:
    """Wait until the page painted the last state event (its version stops changing)."""
    last = None
    for _ in range(100):
        now = await page.evaluate("document.body.dataset.version || ''")
        if now and now == last and now != version_before:
            return
        last = now
        await page.wait_for_timeout(120)
    raise AssertionError("the page never settled")


async def check(page: Page, game: str, lang: str, step: str) -> dict[str, Any]:
    """Measure the page; fail naming every readability problem; print the figures."""
    await settle_page(page)
    m = await page.evaluate(MEASURE_JS)
    problems = readability_problems(m)
    assert not problems, f"{game} {lang} {step}:\n" + "\n".join(problems)
    assert m["lang"] == lang
    figures = sizes(m)
    print(f"SIZES {game} {lang} {step} {json.dumps(figures)}")
    if os.environ.get("TABLESENSE_LAYOUT_SHOTS"):  # a folder: keep a picture of every measured step
        await page.screenshot(path=str(Path(os.environ["TABLESENSE_LAYOUT_SHOTS"]) /
                                       f"{game}-{lang}-{step.replace(' ', '-')}.png"))
    return figures


async def layout(page: Page) -> dict[str, list[float]]:
    await settle_page(page)
    result: dict[str, list[float]] = await page.evaluate(LAYOUT_JS)
    return result


def assert_same_layout(before: dict[str, list[float]], after: dict[str, list[float]], what: str) -> None:
    moved = {k: (before[k], after.get(k)) for k in before if before[k] != after.get(k)}
    added = sorted(set(after) - set(before))
    assert not moved and not added, f"{what}: moved {moved}, appeared {added}"


# --- baccarat ---------------------------------------------------------------------------------------


def real_rounds() -> list[dict[str, Any]]:
    return [msgspec.json.decode(line) for line in EZUGI.read_text().splitlines() if line.strip()]


def coup(player: list[str], banker: list[str], pt: int, bt: int, winner: str, pp: bool, bp: bool
         ) -> BaccaratOutcome:
    return BaccaratOutcome(player=tuple(player), banker=tuple(banker), player_total=pt, banker_total=bt,
                           winner=winner, player_natural=len(player) == 2 and pt >= 8,
                           banker_natural=len(banker) == 2 and bt >= 8, player_pair=pp, banker_pair=bp)


async def baccarat_steps(pub: TablePublisher, page: Page, game: str, lang: str) -> dict[str, Any]:
    """70 rounds on the roads (more columns than fit), then round 71: three 10s to the Player (a Perfect
    Pair), 10♦ 10♠ 9♠ to the Banker (a Mixed Pair): Banker wins 9 – 0 with two pair banners."""
    table = pub.table
    board = Scoreboard()
    rows = real_rounds()
    for n in range(1, 71):
        r = rows[(n - 1) % len(rows)]
        rec = r["recorded_result"]
        board.add_results(RoundResults(table=table, ts=TS, shoe=1, round=n, game=game, baccarat=coup(
            r["player"], r["banker"], rec["player_score"], rec["banker_score"], rec["winner"].lower(),
            rec["player_pair"], rec["banker_pair"])))
    board.set_cards_remaining(96)
    await pub.send("scoreboard", board.message(table, ts=TS), retain=True)
    head = {"table": table, "ts": TS, "shoe": 1, "round": 71, "game": game}
    await pub.send("round", RoundState(**head, phase="betting", cards_remaining=102), retain=True)
    first = await check(page, game, lang, "betting")
    before = await layout(page)
    cards = ["10H", "10D", "10H", "10S", "10C", "9S"]
    where = ["player", "banker", "player", "banker", "player", "banker"]
    public = tuple(PublicCard(index=i + 1, card=c, position=where[i]) for i, c in enumerate(cards))
    for n in range(1, 7):
        await pub.send("round", RoundState(**head, phase="dealing", cards=public[:n],
                                           cards_remaining=102 - n), retain=True)
    await expect(page.get_by_test_id("card")).to_have_count(6, timeout=WAIT_MS)
    dealt = await check(page, game, lang, "dealt")
    assert_same_layout(before, await layout(page), f"{game} {lang}: cards dealt")
    before = await layout(page)
    for hand, cat, odds in (("player", "perfect_pair", "25 to 1"), ("banker", "mixed_pair", "6 to 1")):
        await pub.send("settlements", SettlementMessage(
            table=table, ts=TS, shoe=1, round=71, spot=f"1{hand[0].upper()}PP", seat="1", bet="perfect_pairs",
            hand=hand, stake=500, outcome="win", category=cat, odds=odds, net=500 * int(odds.split()[0])))
    results = RoundResults(table=table, ts=TS, shoe=1, round=71, game=game,
                           baccarat=coup(cards[0::2], cards[1::2], 0, 9, "banker", True, True))
    await pub.send("results", results)
    board.add_results(results)
    board.set_cards_remaining(96)
    await pub.send("scoreboard", board.message(table, ts=TS), retain=True)
    await pub.send("round", RoundState(**head, phase="complete", cards=public, cards_remaining=96),
                   retain=True)
    await expect(page.get_by_test_id("pair-banner")).to_have_count(2, timeout=WAIT_MS)
    await expect(page.get_by_test_id("outcome")).to_have_attribute("data-winner", "banker")
    done = await check(page, game, lang, "results")
    assert_same_layout(before, await layout(page), f"{game} {lang}: results arrived")
    await pub.send("round", RoundState(**{**head, "round": 72}, phase="betting", cards_remaining=96),
                   retain=True)
    await expect(page.get_by_test_id("outcome-round")).not_to_have_text("", timeout=WAIT_MS)
    await check(page, game, lang, "next betting")
    assert_same_layout(before, await layout(page), f"{game} {lang}: the next round opened")
    # the whole shoe is on the board; the SVG draws the last columns that fit (7 columns of 6)
    bead = page.locator('[data-testid="bead-plate"] svg')
    await expect(bead).to_have_attribute("data-cells", "71")
    assert 36 <= await bead.locator("[data-cell]").count() <= 42
    return {"betting": first, "dealt": dealt, "results": done}


@pytest.mark.parametrize(("game", "lang"), [("baccarat", "en"), ("baccarat", "zh-Hans"),
                                            ("baccarat", "zh-Hant"), ("ez-baccarat", "en")])
async def test_baccarat_is_readable_at_5_m_and_stable_in_every_language(
        broker: MosquittoBroker, page: Page, game: str, lang: str) -> None:
    cfg = load_config(ROOT / f"deploy/examples/{game}.toml")
    prefix = f"ts-layout-{game}-{lang}"
    url, stop = await start_signage(broker.host, broker.port, cfg.table, prefix, "127.0.0.1:0")
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, cfg.table)
            await pub.send("status", TableStatus(table=cfg.table, ts=TS, state="online"), retain=True)
            await pub.send("devices/shoe", DeviceStatus(table=cfg.table, ts=TS, name="shoe", state="online"),
                           retain=True)
            await pub.raw("info", table_info(cfg), retain=True)
            await page.goto(url + ("" if lang == "en" else f"?lang={lang}"))
            await expect(page.get_by_test_id("wager")).not_to_have_count(0, timeout=WAIT_MS)
            await baccarat_steps(pub, page, game, lang)
            # every offered wager with limits and odds, the commission rule, the legend, no technician's text
            wagers = page.get_by_test_id("wager")
            await expect(wagers).to_have_count(len(cfg.wagers))
            assert await page.get_by_test_id("wager-limits").count() == len(cfg.wagers)
            assert await page.get_by_test_id("odds-line").count() == sum(
                len(w["paytable"]) for w in [*table_info(cfg)["wagers"], *table_info(cfg)["main_wagers"]])
            await expect(page.get_by_test_id("commission")).to_have_count(1 if game == "baccarat" else 0)
            await expect(page.locator("[data-legend]")).to_have_count(3)
            text = await page.locator("body").inner_text()
            assert prefix not in text and "shoe: online" not in text and "feed" not in text.lower()
    finally:
        await stop()


# --- blackjack and UTH --------------------------------------------------------------------------------


def seven_boxes(game: str) -> TableConfig:
    """The example config with seven boxes (seats), every one with its pair wager."""
    text = (ROOT / f"deploy/examples/{game}.toml").read_text()
    main, pair, prefix = ("blackjack", "perfect_pairs", ("B", "PP")) if game == "blackjack" else \
        ("ante", "ultimate_pairs", ("A", "U"))
    seats = [str(n) for n in range(1, 8)]
    drop = ("seats =", f'"{prefix[0]}', f'"{prefix[1]}')
    lines = [line for line in text.splitlines() if not line.startswith(drop)]
    spots = [f'"{prefix[0]}{s}" = {{ seat = "{s}", bet = "{main}" }}\n'
             f'"{prefix[1]}{s}" = {{ seat = "{s}", bet = "{pair}" }}' for s in seats]
    out = "\n".join(lines).replace("[spots]", "[spots]\n" + "\n".join(spots))
    out = out.replace(f'game = "{game}"', f'game = "{game}"\nseats = {json.dumps(seats)}', 1)
    return parse_config(out)


BLACKJACK_BOXES = {"1": ("10H", "10H", "perfect_pair", "25 to 1"),
                   "2": ("10D", "10S", "mixed_pair", "6 to 1"),
                   "3": ("10C", "10S", "colored_pair", "12 to 1"), "4": ("QS", "9D", "no_pair", None),
                   "5": ("7H", "7D", "colored_pair", "12 to 1"), "6": ("AS", "10C", "no_pair", None),
                   "7": ("KH", "KC", "mixed_pair", "6 to 1")}
UTH_SEATS = {"1": ("AS", "AC", "aces_with_dealer_aces", "1000 to 1"),
             "2": ("AD", "QD", "ace_queen_or_jack_suited", "20 to 1"),
             "3": ("KS", "KC", "face_pair", "10 to 1"), "4": ("10S", "10C", "low_pair", "3 to 1"),
             "5": ("JH", "9C", "lose", None), "6": ("AH", "KH", "ace_king_suited", "25 to 1"),
             "7": ("QH", "JC", "lose", None)}
UTH_DEALER = ("AD", "AH")
UTH_BOARD = ("10H", "10D", "2S", "3C", "4D")


async def box_game_steps(pub: TablePublisher, page: Page, game: str, lang: str) -> None:
    table = pub.table
    plan = BLACKJACK_BOXES if game == "blackjack" else UTH_SEATS
    head = {"table": table, "ts": TS, "shoe": 2, "round": 5, "game": game}
    if game == "blackjack":
        public, i = [], 0
        for k in (0, 1):
            for seat, hand in plan.items():
                i += 1
                public.append(PublicCard(index=i, card=hand[k], position=seat))
            if k == 0:
                i += 1
                public.append(PublicCard(index=i, card="10D", position="dealer"))
        await pub.send("round", RoundState(**head, phase="dealing", cards=tuple(public[:8])), retain=True)
        await check(page, game, lang, "dealing")
        before = await layout(page)
        await pub.send("round", RoundState(**head, phase="playing", cards=tuple(public)), retain=True)
    else:
        await pub.send("round", RoundState(**head, phase="reveal"), retain=True)
        await expect(page.get_by_test_id("outcome-text")).not_to_have_text("", timeout=WAIT_MS)
        await check(page, game, lang, "face down")
        before = await layout(page)
        public, i = [], 0
        hands = [*((s, h[:2]) for s, h in plan.items()), ("dealer", UTH_DEALER), ("board", UTH_BOARD)]
        for pos, cards in hands:
            for c in cards:
                i += 1
                public.append(PublicCard(index=i, card=c, position=pos))
        await pub.send("round", RoundState(**head, phase="reveal", cards=tuple(public), revealed=True),
                       retain=True)
    await expect(page.get_by_test_id("card")).to_have_count(len(public), timeout=WAIT_MS)
    bet = "perfect_pairs" if game == "blackjack" else "ultimate_pairs"
    for seat, (_, _, cat, odds) in plan.items():
        win = odds is not None
        await pub.send("settlements", SettlementMessage(
            table=table, ts=TS, shoe=2, round=5, spot=f"P{seat}", seat=seat, bet=bet, hand=None, stake=500,
            outcome="win" if win else "lose", category=cat, odds=odds, net=5000 if win else -500))
    hits = sum(1 for h in plan.values() if h[3])
    await expect(page.locator('[data-testid="box-pair"].hit')).to_have_count(hits, timeout=WAIT_MS)
    await check(page, game, lang, "pair results")
    await pub.send("results", RoundResults(
        table=table, ts=TS, shoe=2, round=5, game=game,
        dealer=("10D",) if game == "blackjack" else UTH_DEALER,
        board=() if game == "blackjack" else UTH_BOARD,
        boxes=tuple(BoxResult(position=s, cards=h[:2], pair=h[2]) for s, h in plan.items())))
    await pub.send("round", RoundState(**head, phase="complete", cards=tuple(public), revealed=True),
                   retain=True)
    await expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "complete", timeout=WAIT_MS)
    await check(page, game, lang, "results")
    assert_same_layout(before, await layout(page), f"{game} {lang}: results arrived")
    await expect(page.locator('[data-testid="box-pair"].hit')).to_have_count(hits)


@pytest.mark.parametrize(("game", "lang"), [("blackjack", "en"), ("uth", "en"), ("uth", "zh-Hant")])
async def test_blackjack_and_uth_are_readable_at_5_m_with_seven_boxes(
        broker: MosquittoBroker, page: Page, game: str, lang: str) -> None:
    cfg = seven_boxes(game)
    prefix = f"ts-layout-{game}-{lang}"
    url, stop = await start_signage(broker.host, broker.port, cfg.table, prefix, "127.0.0.1:0")
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, cfg.table)
            await pub.send("status", TableStatus(table=cfg.table, ts=TS, state="online"), retain=True)
            await pub.raw("info", table_info(cfg), retain=True)
            await page.goto(url + ("" if lang == "en" else f"?lang={lang}"))
            await expect(page.get_by_test_id("box-result")).to_have_count(7, timeout=WAIT_MS)
            await box_game_steps(pub, page, game, lang)
    finally:
        await stop()


async def new_display(page: Page) -> Page:
    """A second screen: another page of the same browser (its own context)."""
    browser = page.context.browser
    assert browser is not None
    return await browser.new_page(viewport=VIEWPORT)


async def test_each_display_chooses_its_language_the_table_config_gives_the_default(
        broker: MosquittoBroker, page: Page) -> None:
    """``[signage] language`` (published in the info message) is the default; ``?lang=`` overrides it for
    one display while another display of the same table keeps the default."""
    text = (ROOT / "deploy/examples/baccarat.toml").read_text() + '\n[signage]\nlanguage = "zh-Hant"\n'
    cfg = parse_config(text)
    prefix = "ts-layout-lang"
    url, stop = await start_signage(broker.host, broker.port, cfg.table, prefix, "127.0.0.1:0")
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, cfg.table)
            await pub.send("status", TableStatus(table=cfg.table, ts=TS, state="online"), retain=True)
            await pub.raw("info", table_info(cfg), retain=True)
            await pub.send("round", RoundState(table=cfg.table, ts=TS, shoe=3, round=9, game="baccarat",
                                               phase="betting"), retain=True)
            english = await new_display(page)
            await english.goto(url + "?lang=en")
            await page.goto(url)
            await expect(page.get_by_test_id("game")).to_have_text("百家樂", timeout=WAIT_MS)
            await expect(page.get_by_test_id("round-no")).to_have_text("第3靴 · 第9局")
            await expect(page.get_by_test_id("phase")).to_have_text("請下注")
            await expect(page.locator("html")).to_have_attribute("lang", "zh-Hant")
            await expect(english.get_by_test_id("game")).to_have_text("Baccarat", timeout=WAIT_MS)
            await expect(english.get_by_test_id("round-no")).to_have_text("Shoe 3 · Round 9")
            await expect(english.get_by_test_id("phase")).to_have_text("Place your bets")
            simplified = await new_display(page)
            await simplified.goto(url + "?lang=zh-CN")
            await expect(simplified.get_by_test_id("game")).to_have_text("百家乐", timeout=WAIT_MS)
            await expect(simplified.get_by_test_id("wager").first).to_contain_text("闲")
            # the Chinese glyphs are drawn from Debian's Noto Sans CJK (fonts-noto-cjk, installed by .ci/run),
            # as Chromium reports the platform fonts it used for the element
            for display, region in ((simplified, "SC"), (page, "TC")):
                cdp = await display.context.new_cdp_session(display)
                await cdp.send("DOM.enable")
                await cdp.send("CSS.enable")
                root = await cdp.send("DOM.getDocument")
                node = await cdp.send("DOM.querySelector", {"nodeId": root["root"]["nodeId"],
                                                           "selector": '[data-testid="game"]'})
                used = await cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})
                families = {f["familyName"] for f in used["fonts"]}
                assert f"Noto Sans CJK {region}" in families, families
    finally:
        await stop()
