"""The signage page in a real headless Chromium (Debian's package), driven by Playwright's Python API.

A real Mosquitto owned by the test; messages published the way the daemon publishes them (same topics,
same payloads from daemon/messages.py and daemon/scoreboard.py), or by the daemon itself from a simulated
shoe. Assertions are on what a player sees: the roads' cells and colours, the pair-win banner, the
notices ("Connecting…", "Table closed", "Feed offline"), the blackjack and UTH pair results, and that the
technician's detail appears only with ``?operator=1``. Sizes and layout: tests/test_signage_layout.py;
the screenshots in docs/screenshots come from docs/screenshots/make.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
import msgspec
import pytest
from e2e_support import start_table
from signage_support import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, TS, VIEWPORT, WAIT_MS, TablePublisher

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import load_config
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
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.pairs import BACCARAT_PERFECT_PAIRS, classify_pair
from tablesense.daemon.scoreboard import Scoreboard
from tablesense.daemon.signage.info import table_info
from tablesense.daemon.signage.server import start_signage

ROOT = Path(__file__).resolve().parents[1]
EZUGI = ROOT / "tests" / "data" / "real-shoes" / "ezugi_queenco_32100_2022-11-28.jsonl"

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM),
    pytest.mark.skipif(mosquitto_binary() is None, reason="the mosquitto binary is not installed"),
]

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
            pg = await browser.new_page(viewport=VIEWPORT)
            yield pg
        finally:
            await browser.close()


def positions(n: int, player_cards: int) -> list[str]:
    """Where the n-th card of a baccarat round goes (rules.md §5.1 design note, § 627a.8, § 631a.11)."""
    base = ["player", "banker", "player", "banker"]
    if n == 5:
        base.append("player" if player_cards == 3 else "banker")
    if n == 6:
        base += ["player", "banker"]
    return base[:n]


async def deal_baccarat_round(pub: TablePublisher, board: Scoreboard, shoe: int, rnd: int, cards: list[str],
                              player: list[str], banker: list[str], winner: str, pt: int, bt: int,
                              cards_left: int) -> None:
    """One round as the daemon publishes it: betting, each card revealed, results, pair settlements,
    scoreboard (retained)."""
    game = "baccarat"
    head = {"table": pub.table, "ts": TS, "shoe": shoe, "round": rnd, "game": game}
    await pub.send("round", RoundState(**head, phase="betting", cards_remaining=cards_left + len(cards)),
                   retain=True)
    where = positions(len(cards), len(player))
    public = tuple(PublicCard(index=i + 1, card=c, position=where[i]) for i, c in enumerate(cards))
    await pub.send("round", RoundState(**head, phase="dealing", cards=public, cards_remaining=cards_left),
                   retain=True)
    pp = Card.parse(player[0]).rank == Card.parse(player[1]).rank
    bp = Card.parse(banker[0]).rank == Card.parse(banker[1]).rank
    outcome = BaccaratOutcome(player=tuple(player), banker=tuple(banker), player_total=pt, banker_total=bt,
                              winner=winner, player_natural=len(player) == 2 and pt >= 8,
                              banker_natural=len(banker) == 2 and bt >= 8, player_pair=pp, banker_pair=bp)
    results = RoundResults(table=pub.table, ts=TS, shoe=shoe, round=rnd, game=game, baccarat=outcome)
    await pub.send("results", results)
    paytable = BACCARAT_PERFECT_PAIRS["A"]
    for hand, hcards in (("player", player), ("banker", banker)):
        kind = classify_pair(Card.parse(hcards[0]), Card.parse(hcards[1]))
        if kind is None:
            await pub.send("settlements", SettlementMessage(
                table=pub.table, ts=TS, shoe=shoe, round=rnd, spot=f"2{hand[0].upper()}PP", seat="2",
                bet="perfect_pairs", hand=hand, stake=1000, outcome="lose", category="no_pair", odds=None,
                net=-1000))
        else:
            odds = paytable.odds(kind)
            await pub.send("settlements", SettlementMessage(
                table=pub.table, ts=TS, shoe=shoe, round=rnd, spot=f"2{hand[0].upper()}PP", seat="2",
                bet="perfect_pairs", hand=hand, stake=1000, outcome="win", category=kind.value,
                odds=str(odds), net=1000 * odds.pays // odds.per))
    board.set_cards_remaining(cards_left)
    assert board.add_results(results)
    await pub.send("scoreboard", board.message(pub.table, ts=TS), retain=True)
    await pub.send("round", RoundState(**head, phase="complete", cards=public, cards_remaining=cards_left),
                   retain=True)


async def road(page: Page, testid: str) -> list[dict[str, str | None]]:
    """The cells drawn in one road: colour and result attributes plus the SVG paint actually used."""
    cells: list[dict[str, str | None]] = await page.eval_on_selector_all(
        f'[data-testid="{testid}"] [data-cell]',
        """els => els.map(g => {
            const shape = g.querySelector('circle, line');
            return {colour: g.dataset.colour, result: g.dataset.result || null, ties: g.dataset.ties || null,
                    paint: shape.getAttribute('fill') === 'none' || shape.tagName === 'line'
                        ? shape.getAttribute('stroke') : shape.getAttribute('fill')};
        })""")
    return cells


PAINT = {"red": "#e11d2e", "blue": "#1e5bff", "green": "#19a64a"}


async def open_signage(broker: MosquittoBroker, table: str, prefix: str, info: dict[str, Any] | None = None,
                       ) -> tuple[str, Callable[[], Awaitable[None]]]:
    return await start_signage(broker.host, broker.port, table, prefix, "127.0.0.1:0", info=info)


async def test_baccarat_shoe_roads_pair_banner_and_offline_notices(
        broker: MosquittoBroker, page: Page, tmp_path: Path) -> None:
    rows = [msgspec.json.decode(line) for line in EZUGI.read_text().splitlines() if line.strip()]
    table, prefix = "bac-01", "ts-browser-bac"
    info = table_info(load_config(ROOT / "deploy/examples/baccarat.toml"))
    url, stop = await open_signage(broker, table, prefix)
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, table)
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await pub.raw("info", info, retain=True)
            await pub.send("devices/shoe", DeviceStatus(table=table, ts=TS, name="shoe", state="online"),
                           retain=True)
            # a floor record with a secret: signage never subscribes to floor/, so it never shows it
            await pub.raw("floor/rounds", {"schema": "tablesense.floor_round", "table": table, "ts": TS,
                                           "game": "baccarat", "secret": "FLOOR-ONLY-7Q"}, retain=True)
            await page.goto(url)
            await expect(page.get_by_test_id("table-id")).to_have_text(table, timeout=WAIT_MS)
            await expect(page.get_by_test_id("offline-notice")).to_be_hidden(timeout=WAIT_MS)

            # 24 real rounds (Ezugi table 32100, 2022-11-28) as one scripted shoe
            board, left = Scoreboard(), 416 - 3  # 8 decks, less a burn of 3 (illustrative)
            for r in rows:
                rec = r["recorded_result"]
                left -= len(r["cards"])
                await deal_baccarat_round(pub, board, 1, r["round"], r["cards"], r["player"], r["banker"],
                                          rec["winner"].lower(), rec["player_score"], rec["banker_score"],
                                          left)
            seq = "".join(r["recorded_result"]["winner"][0] for r in rows)
            assert seq == "PPBBBBPBPBPPPBPPTPPBBBBP"
            bead_cells = page.locator('[data-testid="bead-plate"] [data-cell]')
            await expect(bead_cells).to_have_count(24, timeout=WAIT_MS)
            bead = await road(page, "bead-plate")
            assert "".join(c["result"][0].upper() for c in bead if c["result"]) == seq
            assert all(c["paint"] == PAINT[c["colour"] or ""] for c in bead)
            bead_colours = [c["colour"] for c in bead]
            assert bead_colours.count("red") == 11 and bead_colours.count("green") == 1
            big = await road(page, "big-road")
            assert len(big) == 23  # ties take no cell
            assert [c["ties"] for c in big].count("1") == 1
            assert all(c["paint"] == PAINT[c["colour"] or ""] for c in big)
            # derived roads, hand-computed from the streaks 2,4,1,1,1,1,3,1,4,4,1 (rules.md §5.2)
            expected = {"big-eye-boy": "RBRBBRRRBRBBBRRBRRRR", "small-road": "BBRRBRBRRRBBBRRB",
                        "cockroach-pig": "BBRBRBRBRRBRRBB"}
            for testid, colours in expected.items():
                cells = await road(page, testid)
                assert "".join("R" if c["colour"] == "red" else "B" for c in cells) == colours, testid
                assert all(c["paint"] == PAINT[c["colour"] or ""] for c in cells), testid
            stats = page.get_by_test_id("shoe-stats")
            await expect(stats.locator('[data-stat="banker"]')).to_have_text("11")
            await expect(stats.locator('[data-stat="player"]')).to_have_text("12")
            await expect(stats.locator('[data-stat="tie"]')).to_have_text("1")

            # a scripted Player Perfect Pair (8♠ 8♠) against a Banker natural 9
            await deal_baccarat_round(pub, board, 1, 25, ["8S", "9H", "8S", "KD"], ["8S", "8S"], ["9H", "KD"],
                                      "banker", 6, 9, left - 4)
            banner = page.get_by_test_id("pair-banner")
            await expect(banner).to_have_count(1, timeout=WAIT_MS)
            await expect(banner).to_have_text("Player Perfect Pair — 25 to 1")
            await expect(bead_cells).to_have_count(25, timeout=WAIT_MS)
            await expect(page.get_by_test_id("card")).to_have_count(4)
            await expect(page.get_by_test_id("outcome-text")).to_have_text("Banker wins 9 – 6 · Natural")
            wagers = page.get_by_test_id("wager-list")
            await expect(wagers).to_contain_text("Perfect Pairs")
            await expect(wagers).to_contain_text("25 to 1")
            await expect(wagers).to_contain_text("€5 – €200")
            assert "FLOOR-ONLY-7Q" not in await page.content()

            # the daemon stops cleanly: retained status "offline"
            await pub.send("status", TableStatus(table=table, ts=TS, state="offline"), retain=True)
            notice = page.get_by_test_id("offline-notice")
            await expect(notice).to_be_visible(timeout=WAIT_MS)
            await expect(notice).to_have_text("Table closed")
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await expect(notice).to_be_hidden(timeout=WAIT_MS)
            # a daemon that runs but refuses to settle (damaged journal) closes the table too
            await pub.send("status", TableStatus(table=table, ts=TS, state="refusing"), retain=True)
            await expect(notice).to_have_text("Table closed", timeout=WAIT_MS)
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await expect(notice).to_be_hidden(timeout=WAIT_MS)

        # the broker goes away: the feed is offline; it comes back and the display reconnects on its own
        broker.stop()
        await expect(notice).to_be_visible(timeout=WAIT_MS)
        await expect(notice).to_have_text("Feed offline — reconnecting…")
        broker.start()
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, table)
            # the fresh broker kept nothing: the daemon republishes its retained state on reconnect
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await pub.send("scoreboard", board.message(table, ts=TS), retain=True)
            await expect(notice).to_be_hidden(timeout=WAIT_MS)
    finally:
        await stop()
    # the signage server itself stops: the page's event stream fails and it says so
    await expect(page.get_by_test_id("offline-notice")).to_have_text("Feed offline — reconnecting…",
                                                                      timeout=WAIT_MS)
    # a new server on the same address: the open page reconnects by itself, and the new server (which saw
    # none of the rounds) is complete at once from the retained scoreboard
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    url2, stop2 = await start_signage(broker.host, broker.port, table, prefix, f"127.0.0.1:{port}")
    try:
        assert url2 == url
        await expect(page.get_by_test_id("offline-notice")).to_be_hidden(timeout=WAIT_MS)
        await expect(page.locator('[data-testid="bead-plate"] [data-cell]')).to_have_count(25)
        assert len(await road(page, "big-eye-boy")) == 21
    finally:
        await stop2()


async def test_blackjack_pair_results_per_box_while_the_round_is_played(broker: MosquittoBroker, page: Page
                                                                         ) -> None:
    """Perfect Pairs settles once the box's two cards are out: its result (with the odds) is on the page
    during the play, not only after the round."""
    cfg = load_config(ROOT / "deploy/examples/blackjack.toml")
    table, prefix = cfg.table, "ts-browser-bj"
    url, stop = await open_signage(broker, table, prefix, info=table_info(cfg))
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, table)
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await page.goto(url)
            await expect(page.get_by_test_id("game")).to_have_text("Blackjack", timeout=WAIT_MS)  # from info
            boxes = {"1": ("8H", "8D"), "2": ("QS", "QS"), "4": ("9C", "2D"), "5": ("7S", "7C")}
            cards = []
            i = 0
            for k in (0, 1):
                for box, two in boxes.items():
                    i += 1
                    cards.append(PublicCard(index=i, card=two[k], position=box))
                if k == 0:
                    i += 1
                    # the dealer's up card; the hole card is never on a public topic
                    cards.append(PublicCard(index=i, card="KS", position="dealer"))
            await pub.send("round", RoundState(table=table, ts=TS, shoe=3, round=12, game="blackjack",
                                               phase="playing", cards=tuple(cards), cards_remaining=290),
                           retain=True)
            grades = {"1": ("colored_pair", "12 to 1"), "2": ("perfect_pair", "25 to 1"), "4": (None, None),
                      "5": ("colored_pair", "12 to 1")}
            for box, (cat, odds) in grades.items():
                await pub.send("settlements", SettlementMessage(
                    table=table, ts=TS, shoe=3, round=12, spot=f"{box}PP", seat=box, bet="perfect_pairs",
                    hand=None, stake=1000, outcome="win" if cat else "lose", category=cat or "no_pair",
                    odds=odds, net=(12000 if odds == "12 to 1" else 25000) if cat else -1000))
            pair_cells = page.get_by_test_id("box-pair")
            expected = ["Colored Pair 12 to 1", "Perfect Pair 25 to 1", "", "No pair", "Colored Pair 12 to 1"]
            await expect(pair_cells).to_have_text(expected, timeout=WAIT_MS)  # before any results message
            await expect(page.get_by_test_id("phase")).to_have_text("Playing")
            await pub.send("results", RoundResults(
                table=table, ts=TS, shoe=3, round=12, game="blackjack", dealer=("KS",),
                boxes=tuple(BoxResult(position=b, cards=c, pair=grades[b][0] or "no_pair")
                            for b, c in boxes.items())))
            await pub.send("round", RoundState(table=table, ts=TS, shoe=3, round=12, game="blackjack",
                                               phase="complete", cards=tuple(cards)), retain=True)
            await expect(page.get_by_test_id("phase")).to_have_text("Round complete", timeout=WAIT_MS)
            await expect(pair_cells).to_have_text(expected)
            await expect(page.get_by_test_id("box-result")).to_have_count(5)  # every box of the table
            await expect(page.locator('[data-testid="box-result"].hit')).to_have_count(3)
            await expect(page.get_by_test_id("roads")).to_be_hidden()
            await expect(page.get_by_test_id("wager-list")).to_contain_text("Perfect Pair")
            await expect(page.get_by_test_id("hand")).to_have_count(1)  # the dealer; boxes are tiles
            await expect(page.get_by_test_id("card")).to_have_count(9)
            # betting on the next round keeps them; no-more-bets clears them
            head = {"table": table, "ts": TS, "shoe": 3, "round": 13, "game": "blackjack"}
            await pub.send("round", RoundState(**head, phase="betting"), retain=True)
            await expect(page.get_by_test_id("round-no")).to_have_text("Shoe 3 · Round 13", timeout=WAIT_MS)
            await expect(pair_cells).to_have_text(expected)
            await pub.send("round", RoundState(**head, phase="dealing"), retain=True)
            await expect(page.get_by_test_id("card")).to_have_count(0, timeout=WAIT_MS)
            await expect(pair_cells).to_have_text(["", "", "", "", ""])
    finally:
        await stop()


def derived_count(winners: str, k: int) -> int:
    """Marks a derived road with offset k must have: one per Big Road cell from column k+1 row 2, else
    column k+2 row 1 (rules.md §5.2), computed here from the logical streaks independently of the page."""
    cells: list[tuple[int, int]] = []
    last, streak, depth = "", 0, 0
    for w in winners:
        if w == "T":
            continue
        if w == last:
            depth += 1
        else:
            last, streak, depth = w, streak + 1, 1
        cells.append((streak, depth))
    for i, cell in enumerate(cells):
        if cell in ((k + 1, 2), (k + 2, 1)):
            return len(cells) - i
    return 0


async def test_demo_shoe_end_to_end_on_the_page(broker: MosquittoBroker, page: Page, tmp_path: Path) -> None:
    """`tablesense demo`'s simulated shoe -> ptys -> the daemon -> Mosquitto -> signage -> Chromium."""
    import io
    import re

    from tablesense.daemon.commands.demo import run_demo
    from tablesense.daemon.rules.pairs import classify_pair
    from tablesense.daemon.signage.view import category_label

    rounds = 10
    url, stop = await open_signage(broker, "demo-baccarat", "tablesense")
    try:
        await page.goto(url)
        await expect(page.get_by_test_id("offline-notice")).to_have_text("Connecting…", timeout=WAIT_MS)
        buf = io.StringIO()
        await run_demo("baccarat", rounds, 1, broker=(broker.host, broker.port), out=buf)
        out = buf.getvalue()
        line = r"^\[demo-baccarat\] round \d+/\d+ P (.*?) =\d B (.*?) =\d -> (player|banker|tie)\b"
        dealt = re.findall(line, out, re.M)
        assert len(dealt) == rounds, out
        winners = "".join(w[0].upper() for _, _, w in dealt)
        bead_cells = page.locator('[data-testid="bead-plate"] [data-cell]')
        await expect(bead_cells).to_have_count(rounds, timeout=WAIT_MS)
        bead = await road(page, "bead-plate")
        assert "".join((c["result"] or "?")[0].upper() for c in bead) == winners
        assert all(c["paint"] == PAINT[c["colour"] or ""] for c in bead)
        big = await road(page, "big-road")
        assert len(big) == rounds - winners.count("T")
        assert sum(int(c["ties"] or 0) for c in big) == winners.count("T") or not big
        for testid, k in (("big-eye-boy", 1), ("small-road", 2), ("cockroach-pig", 3)):
            assert len(await road(page, testid)) == derived_count(winners, k), testid
        # the last round's pairs, graded from the cards the demo printed, each have a banner
        player, banker, _ = dealt[-1]
        expected = set()
        for hand, cards in (("Player", player.split()), ("Banker", banker.split())):
            kind = classify_pair(Card.parse(cards[0]), Card.parse(cards[1]))
            if kind is not None:
                expected.add(f"{hand} {category_label(kind.value)}")
        banners = await page.get_by_test_id("pair-banner").all_inner_texts()
        assert {b.split(" — ")[0] for b in banners} == expected
        assert all(" to 1" in b for b in banners)
        # the last round's result stays on screen (also while the next round is open for betting)
        player_total, banker_total = re.findall(r"P .*? =(\d) B .*? =(\d) -> ", out)[-1]
        winner = dealt[-1][2]
        if winner == "tie":
            shown = f"Tie {player_total} – {banker_total}"
        else:
            w, lo = (banker_total, player_total) if winner == "banker" else (player_total, banker_total)
            shown = f"{winner.capitalize()} wins {w} – {lo}"
        await expect(page.get_by_test_id("outcome")).to_contain_text(shown)
        # the demo stopped its daemon cleanly: the retained status says offline
        notice = page.get_by_test_id("offline-notice")
        await expect(notice).to_have_text("Table closed", timeout=WAIT_MS)
    finally:
        await stop()


async def test_uth_seat_pair_results_after_the_reveal(broker: MosquittoBroker, page: Page) -> None:
    cfg = load_config(ROOT / "deploy/examples/uth.toml")
    table, prefix = cfg.table, "ts-browser-uth"
    url, stop = await open_signage(broker, table, prefix, info=table_info(cfg))
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, table)
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            await page.goto(url)
            await expect(page.get_by_test_id("game")).to_have_text("Ultimate Texas Hold 'Em", timeout=WAIT_MS)
            # before the reveal the daemon publishes no card of a UTH round (information barrier)
            head = {"table": table, "ts": TS, "shoe": 4, "round": 1, "game": "uth"}
            await pub.send("round", RoundState(**head, phase="playing"), retain=True)
            await expect(page.get_by_test_id("phase")).to_have_text("Playing", timeout=WAIT_MS)
            await expect(page.get_by_test_id("round-no")).to_have_text("Hand 4")
            await expect(page.get_by_test_id("card")).to_have_count(0)
            await expect(page.get_by_test_id("outcome-text")).to_have_text(
                "Cards are dealt face down — shown at the reveal")
            hands = {"2": ("AS", "KS"), "5": ("7H", "2C"), "dealer": ("AD", "9C"),
                     "board": ("3D", "JC", "QH", "4S", "8D")}
            cards, i = [], 0
            for pos, cs in hands.items():
                for c in cs:
                    i += 1
                    cards.append(PublicCard(index=i, card=c, position=pos))
            await pub.send("round", RoundState(**head, phase="reveal", cards=tuple(cards), revealed=True),
                           retain=True)
            await pub.send("settlements", SettlementMessage(
                table=table, ts=TS, shoe=4, round=1, spot="U2", seat="2", bet="ultimate_pairs", hand=None,
                stake=500, outcome="win", category="ace_king_suited", odds="25 to 1", net=12500))
            await pub.send("settlements", SettlementMessage(
                table=table, ts=TS, shoe=4, round=1, spot="U5", seat="5", bet="ultimate_pairs", hand=None,
                stake=500, outcome="lose", category="lose", odds=None, net=-500))
            await pub.send("results", RoundResults(
                table=table, ts=TS, shoe=4, round=1, game="uth", dealer=hands["dealer"], board=hands["board"],
                boxes=(BoxResult(position="2", cards=hands["2"], pair="ace_king_suited"),
                       BoxResult(position="5", cards=hands["5"], pair="lose"))))
            seat = '[data-testid="box-result"][data-position="{}"] [data-testid="box-pair"]'
            await expect(page.locator(seat.format(2))).to_have_text("A-K suited 25 to 1", timeout=WAIT_MS)
            await expect(page.locator(seat.format(5))).to_have_text("No win")
            await expect(page.get_by_test_id("card")).to_have_count(11)
            await expect(page.locator('[data-testid="hand"][data-position="board"] [data-testid="card"]')
                         ).to_have_count(5)
    finally:
        await stop()


UTH_HAND_1 = ["AS", "7H", "QC", "AD", "JS", "KS", "7D", "9D", "AH", "10H", "10S", "4C", "2D", "QH", "3S"]
"""Seats 1, 2, 4, 5 and the dealer card by card, then the board: A♠ K♠ (A-K suited), 7♥ 7♦ (a low pair),
Q♣ 9♦ (nothing), A♦ A♥ (A-A); dealer J♠ 10♥; board 10♠ 4♣ 2♦ Q♥ 3♠."""
UTH_HAND_2 = ["KC", "2H", "5S", "6D", "8C", "3H", "9C", "JD", "4S", "9S", "KD", "7H", "2C", "10D", "QS"]
"""No seat holds a paying line: K♣ 3♥, 2♥ 9♣, 5♠ J♦, 6♦ 4♠; dealer 8♣ 9♠; board K♦ 7♥ 2♣ 10♦ Q♠."""
UTH_WAGERS = {"A1": 2000, "U1": 1000, "A2": 1000, "U2": 500, "A4": 5000, "U4": 500, "A5": 1000, "U5": 2500}
SPARE = ["2S", "3D", "4H", "5D"]

RECORD_CARDS_JS = """
() => {
  window.cardsWhileFaceDown = 0;
  const look = () => {
    const phase = document.querySelector('[data-testid="phase"]').dataset.phase;
    const n = document.querySelectorAll('[data-testid="card"]').length;
    const before = document.querySelector('[data-testid="phase"]').dataset.revealed !== 'true';
    if ((phase === 'dealing' || phase === 'reveal') && before && n > window.cardsWhileFaceDown) {
      window.cardsWhileFaceDown = n;
    }
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true,
                                                    attributes: true});
}
"""


async def test_uth_from_the_daemon_the_hand_stays_on_screen_until_the_next_hand_closes_betting(
        broker: MosquittoBroker, page: Page, tmp_path: Path) -> None:
    """The daemon deals UTH from a fresh deck every hand (a new shoe, round 1): the page numbers hands by
    the deck ("Hand 2", not "Round 1"), shows the revealed hand with its pair results while the next hand
    is open for betting, says the cards are face down from no-more-bets to the reveal, and never shows a
    card of a hand before its reveal."""
    config, sim, daemon, _rec = await start_table(broker, tmp_path, "uth", cards=UTH_HAND_1 + SPARE)
    url, stop = await start_signage(broker.host, broker.port, config.table, config.mqtt.topic_prefix,
                                    "127.0.0.1:0")
    try:
        await page.goto(url)
        await sim.play_round(UTH_WAGERS)
        tiles = page.get_by_test_id("box-pair")
        first = ["A-K suited 25 to 1", "Pair 2s–10s 3 to 1", "", "No win", "A-A 30 to 1", ""]
        await expect(tiles).to_have_text(first, timeout=WAIT_MS)
        await expect(page.get_by_test_id("round-no")).to_have_text("Hand 1")
        sim.shoe.script = [Card.parse(c) for c in UTH_HAND_2 + SPARE]  # the next deck
        sim.betting, sim.pace = 8.0, 0.3  # time to look: 8 s of betting, then 0.3 s per card
        hand = asyncio.create_task(sim.play_round(UTH_WAGERS))
        # hand 2 is open for betting: hand 1 is still on screen
        await expect(page.get_by_test_id("round-no")).to_have_text("Hand 2", timeout=WAIT_MS)
        await expect(page.get_by_test_id("phase")).to_have_text("Place your bets")
        await expect(tiles).to_have_text(first)
        await expect(page.get_by_test_id("outcome-round")).to_have_text("Hand 1")
        await expect(page.locator('[data-testid="hand"][data-position="board"] [data-testid="card"]')
                     ).to_have_count(5)
        await page.evaluate(RECORD_CARDS_JS)
        # no more bets: the last hand goes, the new one is face down until the reveal
        await expect(page.get_by_test_id("outcome-text")).to_have_text(
            "Cards are dealt face down — shown at the reveal", timeout=WAIT_MS)
        await expect(page.get_by_test_id("card")).to_have_count(0)
        await asyncio.wait_for(hand, 60)
        second = ["No win", "No win", "", "No win", "No win", ""]
        await expect(tiles).to_have_text(second, timeout=WAIT_MS)
        await expect(page.get_by_test_id("card")).to_have_count(15)
        assert await page.evaluate("window.cardsWhileFaceDown") == 0
    finally:
        await stop()
        assert await daemon.terminate() == 0


async def test_first_load_says_connecting_until_the_first_message(broker: MosquittoBroker, page: Page
                                                                 ) -> None:
    """No alarm before anything is known: "Connecting…" (not "Feed offline", not "table unknown") while
    the broker cannot be reached yet and until the table's first message; then nothing."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    url, stop = await start_signage("127.0.0.1", dead, "T1", "ts-browser-connect", "127.0.0.1:0")
    try:
        await page.goto(url)
        notice = page.get_by_test_id("offline-notice")
        await expect(notice).to_have_text("Connecting…", timeout=WAIT_MS)
        await page.wait_for_timeout(1500)  # several failed attempts (backoff 0.2 s ...)
        await expect(notice).to_have_text("Connecting…")
        await expect(notice).to_have_attribute("data-kind", "connecting")
        text = await page.locator("body").inner_text()
        assert "offline" not in text.lower() and "unknown" not in text.lower()
    finally:
        await stop()
    url, stop = await open_signage(broker, "T1", "ts-browser-connect")
    try:
        await page.goto(url)
        notice = page.get_by_test_id("offline-notice")
        await expect(notice).to_have_text("Connecting…", timeout=WAIT_MS)
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, "ts-browser-connect", "T1")
            await page.wait_for_timeout(500)  # connected to the broker, but no table message yet
            await expect(notice).to_have_text("Connecting…")
            await pub.send("status", TableStatus(table="T1", ts=TS, state="online"), retain=True)
            await expect(notice).to_be_hidden(timeout=WAIT_MS)
    finally:
        await stop()


async def test_technicians_detail_only_with_operator_1_and_a_favicon(broker: MosquittoBroker, page: Page
                                                                     ) -> None:
    prefix, table = "ts-browser-op", "bac-01"
    url, stop = await open_signage(broker, table, prefix, info=table_info(
        load_config(ROOT / "deploy/examples/baccarat.toml")))
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    try:
        async with aiomqtt.Client(broker.host, broker.port) as client:
            pub = TablePublisher(client, prefix, table)
            await pub.send("status", TableStatus(table=table, ts=TS, state="online"), retain=True)
            for name, state in (("shoe", "disconnected"), ("pads", "disconnected")):
                await pub.send(f"devices/{name}", DeviceStatus(table=table, ts=TS, name=name, state=state),
                               retain=True)
            await pub.send("round", RoundState(table=table, ts=TS, shoe=1, round=1, game="baccarat",
                                               phase="betting"), retain=True)
            await page.goto(url)
            await expect(page.get_by_test_id("phase")).to_have_text("Place your bets", timeout=WAIT_MS)
            await expect(page.get_by_test_id("operator")).to_be_hidden()
            text = await page.locator("body").inner_text()
            for technical in (prefix, "disconnected", "shoe:", "feed", "rejected"):
                assert technical not in text, technical
            await page.goto(url + "?operator=1")
            footer = page.get_by_test_id("operator")
            await expect(footer).to_be_visible(timeout=WAIT_MS)
            await expect(footer).to_contain_text(f"{prefix}/{table}")
            await expect(footer).to_contain_text("shoe: disconnected")
            await expect(footer).to_contain_text("feed live")
            await expect(page.get_by_test_id("phase")).to_have_text("Place your bets")
        async with aiohttp.ClientSession() as http, http.get(url + "favicon.ico") as r:
            assert r.status == 200 and r.content_type == "image/x-icon"
            assert (await r.read())[:4] == b"\x00\x00\x01\x00"  # an ICO file
        assert not missing, missing
    finally:
        await stop()
