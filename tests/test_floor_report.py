"""Table-games accounting: ``tablesense floor report`` over a floor database whose every figure is known.

Four baccarat rounds of table ``bac-30`` across two gaming days of a casino in New York whose gaming day
starts at 06:00 local time (05:30 local belongs to the day before), one of them void. Handle, player net,
house win, commission, hold and the theoretical win (handle x the exact house edge from the same analyser
as ``tablesense analyze``) are checked as exact decimals; the CLI is run as a subprocess on SQLite and
the same report is built on PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import date
from fractions import Fraction
from pathlib import Path

import msgspec
from floor_support import pg_url

from tablesense.daemon.floor.accounting import GamingDay, build_report, decimal_text, money
from tablesense.daemon.floor.ingest import Incoming, Ingestor
from tablesense.daemon.floor.migrations import migrate
from tablesense.daemon.floor.store import open_database
from tablesense.daemon.messages import (
    FloorRound,
    Message,
    SettlementMessage,
    TableInfo,
    WagerInfo,
    encode_message,
)
from tablesense.daemon.rules.games import get_game
from tablesense.daemon.rules.money import CommissionRule

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
EPOCH = "0a0b0c0d"
NY = GamingDay(6, "America/New_York")


def _edges() -> dict[tuple[str, str | None], Fraction]:
    g = get_game("baccarat")
    rules = g.rules(8, {"perfect_pairs": "A"}, CommissionRule(CommissionRule.parse_rate("5%")))
    return {(a.bet.value, a.hand.value if a.hand else None): a.house_edge for a in g.analyze(rules)}


EDGE = _edges()


def messages() -> list[tuple[str, Message]]:
    out: list[tuple[str, Message]] = []
    seq = 0

    def add(channel: str, m: Message) -> None:
        nonlocal seq
        seq += 1
        out.append((channel, msgspec.structs.replace(m, seq=seq, msg_id=f"bac-30-{EPOCH}-{seq}")))

    add("info", TableInfo(table="bac-30", ts="2026-12-01T14:00:00.000Z", shoe=1, game="baccarat", decks=8,
                          currency="USD", minor_unit=2, commission="5%",
                          wagers=(WagerInfo(bet="perfect_pairs", label="Perfect Pairs", paytable_name="A",
                                            min=500, max=20000),)))
    rounds = [  # ts, round, void, [(spot, bet, hand, stake, outcome, net, commission)]
        ("2026-12-01T15:00:00.000Z", 1, False, [("1", "banker", None, 10000, "win", 9500, 500),
                                               ("2", "perfect_pairs", "player", 500, "lose", -500, 0)]),
        ("2026-12-02T10:30:00.000Z", 2, False, [("1", "banker", None, 10000, "lose", -10000, 0)]),
        ("2026-12-02T12:00:00.000Z", 3, True, [("1", "banker", None, 5000, "void", 0, 0)]),
        ("2026-12-02T13:00:00.000Z", 4, False, [("3", "player", None, 2000, "win", 2000, 0),
                                               ("2", "perfect_pairs", "player", 500, "win", 12500, 0)]),
    ]
    for ts, rnd, void, wagers in rounds:
        for spot, bet, hand, stake, outcome, net, comm in wagers:
            odds = None if outcome != "win" else "25 to 1" if bet == "perfect_pairs" else "1 to 1"
            add("settlements", SettlementMessage(table="bac-30", ts=ts, shoe=1, round=rnd, spot=spot,
                                                 seat=spot,
                                                 bet=bet, hand=hand, stake=stake, outcome=outcome,
                                                 category=outcome, odds=odds,
                                                 net=net, commission=comm))
        add("floor/rounds", FloorRound(table="bac-30", ts=ts, shoe=1, round=rnd, game="baccarat", void=void))
    return out


async def fill(url: str) -> None:
    db = open_database(url)
    try:
        await migrate(db)
        async with db.transaction() as tx:
            got = await Ingestor().apply(tx, [Incoming(f"tablesense/bac-30/{ch}", encode_message(m))
                                              for ch, m in messages()])
        assert {o.kind for o in got} == {"stored"}
    finally:
        await db.close()


def expected_theo_day1() -> Fraction:
    return 20000 * EDGE[("banker", None)] + 500 * EDGE[("perfect_pairs", "player")]


def check(report: list[dict[str, object]]) -> None:
    assert [(r["day"], r["table"]) for r in report] == [("2026-12-01", "bac-30"), ("2026-12-02", "bac-30")]
    d1, d2 = (r["totals"] for r in report)
    assert isinstance(d1, dict) and isinstance(d2, dict)
    assert (d1["rounds"], d1["handle"], d1["player_net"], d1["house_win"], d1["commission"]) == (
        2, "205.00", "-10.00", "10.00", "5.00")
    assert d1["hold_pct"] == decimal_text(Fraction(1000, 20500) * 100, 4) == "4.8780"
    # 20000 cents x 1.0579% + 500 cents x 4.0964% = 232.06 cents: $2.32 (in the handle's units)
    assert d1["theo_win"] == "2.32" and round(expected_theo_day1()) == 232
    assert Fraction(str(d1["theo_win_exact_minor"])) == expected_theo_day1()
    assert (d1["void_rounds"], d1["void_stake"]) == (0, "0.00")
    # day 2: the void round apart, a Player win and a Perfect Pair at 25 to 1
    assert (d2["rounds"], d2["handle"], d2["player_net"], d2["house_win"]) == (
        1, "25.00", "145.00", "-145.00")
    assert d2["hold_pct"] == "-580.0000"
    assert (d2["void_rounds"], d2["void_wagers"], d2["void_stake"]) == (1, 1, "50.00")
    theo2 = 2000 * EDGE[("player", None)] + 500 * EDGE[("perfect_pairs", "player")]
    assert Fraction(str(d2["theo_win_exact_minor"])) == theo2
    wagers = {(w["bet"], w["hand"]): w for w in report[0]["wagers"]}  # type: ignore[union-attr, index]
    assert wagers[("banker", None)]["handle"] == "200.00"
    assert wagers[("banker", None)]["house_edge_exact"] == "114753351728/10847218479825"
    assert wagers[("perfect_pairs", "player")]["house_edge_pct"] == decimal_text(Fraction(17, 415) * 100, 4)


def cli(*args: str) -> str:
    r = subprocess.run([TABLESENSE, "floor", "report", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


async def test_report_figures_exact_on_sqlite_through_the_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'floor.sqlite'}"
    await fill(url)
    tz = ["--gaming-day-start", "6", "--timezone", "America/New_York"]
    check(json.loads(cli("--database", url, "--format", "json", *tz)))
    one = json.loads(cli("--database", url, "--format", "json", "--day", "2026-12-02", "--table", "bac-30",
                         *tz))
    assert [r["day"] for r in one] == ["2026-12-02"]
    rows = list(csv.DictReader(io.StringIO(cli("--database", url, "--format", "csv", *tz))))
    table_rows = [r for r in rows if r["level"] == "table"]
    assert [(r["day"], r["handle"], r["house_win"]) for r in table_rows] == [
        ("2026-12-01", "205.00", "10.00"), ("2026-12-02", "25.00", "-145.00")]
    text = cli("--database", url, *tz)
    assert "gaming day 2026-12-01" in text and "205.00" in text
    # in UTC with a midnight start the 10:30Z round moves to the second day
    utc = json.loads(cli("--database", url, "--format", "json", "--gaming-day-start", "0"))
    assert [r["totals"]["handle"] for r in utc] == ["105.00", "125.00"]


async def test_report_on_postgresql_matches() -> None:
    async with pg_url() as url:
        await fill(url)
        db = open_database(url)
        try:
            report = await build_report(db, NY)
        finally:
            await db.close()
        from tablesense.daemon.floor.accounting import render_json
        check(json.loads(render_json(report)))
        assert [r.day for r in report] == [date(2026, 12, 1), date(2026, 12, 2)]


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    for args, needle in ((["--database", "mysql://x/y"], "unsupported database"),
                         (["--database", f"sqlite:///{tmp_path}/none.sqlite"], "not a floor database"),
                         (["--database", "sqlite:///x", "--timezone", "Mars/Olympus"], "not a known IANA"),
                         (["--database", "sqlite:///x", "--day", "yesterday"], "is not a date")):
        r = subprocess.run([TABLESENSE, "floor", "report", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_money_and_decimals_are_exact() -> None:
    assert money(-1250, 2) == "-12.50" and money(5, 3) == "0.005" and money(7, 0) == "7"
    assert decimal_text(Fraction(1, 8), 2) == "0.12"  # half to even
    assert decimal_text(Fraction(3, 8), 2) == "0.38"


# ---------------------------------------------------------------------- theoretical win in handle's units

async def test_theoretical_win_is_handle_times_edge_in_the_units_of_the_handle(tmp_path: Path) -> None:
    """One Banker wager of $1,000.00 (100000 cents) at 8 decks, 5% commission: theo = 100000 cents x
    114753351728/10847218479825 (the exact edge, 1.0579...%) = 1057.9... cents = $10.58 -- not $1,057.89
    (the minor units printed as if they were major units, 100 times too large)."""
    edge = EDGE[("banker", None)]
    assert edge == Fraction(114753351728, 10847218479825)
    ts = "2026-12-01T15:00:00.000Z"
    msgs: list[tuple[str, Message]] = [
        ("info", TableInfo(table="bac-31", ts=ts, shoe=1, game="baccarat", decks=8, currency="USD",
                           minor_unit=2, commission="5%", wagers=())),
        ("settlements", SettlementMessage(table="bac-31", ts=ts, shoe=1, round=1, spot="1", seat="1",
                                          bet="banker", hand=None, stake=100000, outcome="lose",
                                          category="lose", odds=None, net=-100000)),
    ]
    url = f"sqlite:///{tmp_path / 'floor.sqlite'}"
    db = open_database(url)
    try:
        await migrate(db)
        async with db.transaction() as tx:
            await Ingestor().apply(tx, [Incoming(f"tablesense/bac-31/{ch}", encode_message(
                msgspec.structs.replace(m, seq=i, msg_id=f"bac-31-{EPOCH}-{i}"))) for i, (ch, m) in
                enumerate(msgs, 1)])
        [dt] = await build_report(db, GamingDay(6, "UTC"))
    finally:
        await db.close()
    assert dt.totals.handle == 100000 and dt.totals.theo == 100000 * edge  # exact, in minor units
    from tablesense.daemon.floor.accounting import render_csv, render_json
    totals = json.loads(render_json([dt]))[0]["totals"]
    assert (totals["handle"], totals["theo_win"], totals["theo_hold_pct"]) == ("1000.00", "10.58", "1.0579")
    assert Fraction(totals["theo_win_exact_minor"]) == 100000 * edge
    [row] = [r for r in csv.DictReader(io.StringIO(render_csv([dt]))) if r["level"] == "table"]
    assert (row["handle"], row["theo_win"]) == ("1000.00", "10.58")
    # theo never exceeds the handle for an edge below 100%: the printed amounts agree in magnitude
    assert Fraction(totals["theo_win"]) < Fraction(totals["handle"])
    from tablesense.daemon.floor.accounting import money_exact
    assert money_exact(Fraction(21158, 10), 2) == "21.16" and money_exact(Fraction(5, 2), 0) == "2"


# ---------------------------------------------------------------------- a round voided after a payout

async def test_settlements_paid_before_a_round_was_voided_stay_in_the_figures(tmp_path: Path) -> None:
    """The daemon's own messages (the real state machine): a Perfect Pairs wager wins on the first four
    cards (the Player's pair 5♥ 5♦) and is paid; then the floor voids the round: only the wager not yet
    settled (the Player bet) is settled ``void``. The report keeps the paid pair in the handle and the
    win, shows the round as void and only the void Player bet apart."""
    from machine_support import Driver, baccarat_config

    from tablesense.daemon.table import Channel
    from tablesense.drivers.events import Button

    d = Driver(baccarat_config())
    d.bet("1P", 1000)
    d.bet("1PP", 1000)
    d.button(Button.NO_MORE_BETS)
    d.cards("5H 2C 5D 3C")
    [pp] = d.settlements()
    assert (pp.spot, pp.outcome) == ("1PP", "win") and pp.net > 0
    assert d.command("void_round", shoe="1", round="1", reason="misdeal").ok
    assert sorted((s.spot, s.outcome) for s in d.settlements()) == [("1P", "void"), ("1PP", "win")]
    assert d.floor()[-1].void
    journaled = (Channel.SETTLEMENTS, Channel.FLOOR_ROUNDS, Channel.RESULTS, Channel.ALARMS)
    items = [Incoming(f"tablesense/t1/{e.channel.value}", encode_message(msgspec.structs.replace(
        e.message, seq=i, msg_id=f"t1-{EPOCH}-{i}"))) for i, e in enumerate(
        [e for e in d.emits if e.channel in journaled], 1)]
    db = open_database(f"sqlite:///{tmp_path / 'floor.sqlite'}")
    try:
        await migrate(db)
        async with db.transaction() as tx:
            got = await Ingestor().apply(tx, items)
        assert {o.kind for o in got} == {"stored"}
        [dt] = await build_report(db, GamingDay(0, "UTC"))
    finally:
        await db.close()
    t = dt.totals
    assert (t.rounds, t.void_rounds) == (0, 1)  # the round itself is void
    assert (t.wagers, t.handle, t.player_net) == (1, 1000, pp.net)  # the paid pair counts
    assert t.house_win == -pp.net
    assert (t.void_wagers, t.void_stake) == (1, 1000)  # only the Player bet returned
    [line] = [w for w in dt.wagers if w.bet == "perfect_pairs"]
    assert (line.figures.rounds, line.figures.handle, line.figures.player_net) == (1, 1000, pp.net)


def test_a_broker_port_of_zero_is_one_line_not_a_retry_for_ever(tmp_path: Path) -> None:
    """Port 0 picks a port to listen on; as the broker to connect to, the floor and signage retried for
    ever against it. Now one line, exit 2, before anything runs."""
    for args in (["floor", "--broker", "127.0.0.1:0", "--database", f"sqlite:///{tmp_path}/f.sqlite"],
                 ["signage", "--broker", "127.0.0.1:0", "--table", "T1"]):
        r = subprocess.run([TABLESENSE, *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "the port must be a number 1-65535" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
