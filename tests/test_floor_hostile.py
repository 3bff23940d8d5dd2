"""Hostile input at the floor: JSON that is valid but that no table's daemon writes (numbers beyond 2**53,
a NUL in a text, keys too large for an index, impossible settlements, table infos outside a config's
bounds, msg_ids of another table, times beyond the calendar, replay replies naming what was not asked).
Each is counted and kept for review (quarantine, a floor alarm), never retried for ever, never taking the
consumer, the page or the report down, and the messages around it are stored. On a real Mosquitto and
PostgreSQL (a throwaway database) or SQLite."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from floor_support import wait_for

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.floor.accounting import GamingDay, build_report
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.ingest import Incoming, Ingestor
from tablesense.daemon.floor.migrations import migrate
from tablesense.daemon.floor.service import FloorOptions, FloorService
from tablesense.daemon.floor.store import Database, DatabaseError, open_database
from tablesense.daemon.floor.tracker import ReplayRequest, Tracker
from tablesense.daemon.floor.web import page_model

pytestmark = [pytest.mark.timeout(120)]
needs_broker = pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")
TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
EPOCH = "0a0b0c0d"


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    d = open_database(db_url)
    await migrate(d)
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
def broker(tmp_path: Path) -> AsyncIterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path / "broker") as b:
        yield b  # type: ignore[misc]


def body(schema: str, table: str, seq: int, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": schema, "version": 1, "table": table, "seq": seq,
                           "msg_id": f"{table}-{EPOCH}-{seq}-{secrets.token_hex(4)}",
                           "ts": "2026-12-01T12:00:00.000Z", "shoe": 1, "round": 1}
    return out | kw


def settlement(table: str, seq: int, **kw: Any) -> dict[str, Any]:
    return body("tablesense.settlement", table, seq, spot="1", seat="1", bet="banker", hand=None,
                stake=1000, outcome="lose", category="lose", odds=None, net=-1000) | kw


def alarm(table: str, seq: int, **kw: Any) -> dict[str, Any]:
    return body("tablesense.alarm", table, seq, alarm_id="1.1", code="CUT_CARD", severity="info",
                text="cut card") | kw


def info(table: str, seq: int, **kw: Any) -> dict[str, Any]:
    return body("tablesense.table_info", table, seq, game="baccarat", decks=8, currency="EUR",
                minor_unit=2, commission="5%") | kw


def status(table: str, **kw: Any) -> dict[str, Any]:
    return {"schema": "tablesense.status", "version": 1, "table": table, "seq": 0, "msg_id": "",
            "ts": "2026-12-01T12:00:00.000Z", "state": "online", "epoch": EPOCH, "last_seq": 0,
            "instance": "ab" * 8} | kw


def item(channel: str, payload: dict[str, Any] | bytes) -> Incoming:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    table = "?" if isinstance(payload, bytes) else payload["table"]
    return Incoming(f"tablesense/{table}/{channel}", raw)


async def apply(db: Database, *items: Incoming) -> list[tuple[str, str]]:
    async with db.transaction() as tx:
        out = await Ingestor("tablesense", "test").apply(tx, list(items))
    return [(o.kind, o.reason or "") for o in out]


async def count(db: Database, sql: str, params: tuple[Any, ...] = ()) -> int:
    return int((await db.fetchall(sql, params))[0][0])


# ------------------------------------------------------------------------------------ poison messages


@needs_broker
async def test_a_message_the_database_cannot_hold_does_not_jam_the_floor(
        db_url: str, broker: MosquittoBroker) -> None:
    """Before: a stake of 2**63 ('bigint out of range'; SQLite raised OverflowError and the consumer task
    died), a NUL in a text, an index key over PostgreSQL's 2704 bytes (taken for a lost server) or a raw NUL
    in a payload failed the whole batch, which was retried for ever, nothing acknowledged: one message
    from one table stopped the floor for every table."""
    service = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-h"), FloorOptions(db_url))
    await service.start()
    consumer = service.consumer
    try:
        await wait_for(lambda: consumer.connected, 10, "the floor to connect")
        bad = [("settlements", settlement("t1", 1, stake=2**63, net=-(2**63))),
               ("alarms", alarm("t1", 2, text="a\u0000b")),
               ("alarms", alarm("t1", 3, alarm_id=secrets.token_hex(3000)))]
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            for channel, payload in bad:
                await c.publish(f"tablesense/t1/{channel}", json.dumps(payload).encode(), qos=1)
            await c.publish("tablesense/t1/settlements", b"\x00garbage", qos=1)
            good = settlement("t1", 4)
            await c.publish("tablesense/t1/settlements", json.dumps(good).encode(), qos=1)
        await wait_for(lambda: count(service.db, "SELECT COUNT(*) FROM messages WHERE msg_id = ?",
                                     (good["msg_id"],)), 20, "the good message after the bad ones")
        assert consumer.db_failures == 0
        assert not service._tasks[0].done()
        reasons = "\n".join(r for (r,) in await service.db.fetchall("SELECT reason FROM quarantine"))
        assert "$.stake: 9223372036854775808 is beyond +-(2**53 - 1)" in reasons, reasons
        assert "$.text: text with a NUL character" in reasons, reasons
        assert "not a tablesense message" in reasons, reasons  # the raw NUL, stored escaped
        long_id = await count(service.db, "SELECT COUNT(*) FROM messages WHERE seq = 3")
        if db_url.startswith("postgresql"):  # kept for review; SQLite's index has no such limit
            assert long_id == 0 and "the database cannot store it: index row size" in reasons, reasons
        else:
            assert long_id == 1
    finally:
        await service.stop()


async def test_a_defect_of_the_floor_on_one_message_quarantines_it_and_stores_the_rest(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: any exception other than a database error (a defect of ours on one odd message) went out of
    ``Ingestor.apply``; the consumer's task ended and the floor stopped consuming, silently."""
    real = Ingestor._derived

    async def derived(self: Ingestor, tx: Any, msg: Any, *args: Any) -> None:
        if getattr(msg, "spot", None) == "boom":
            raise RuntimeError("a defect")
        await real(self, tx, msg, *args)

    monkeypatch.setattr(Ingestor, "_derived", derived)
    out = await apply(db, item("settlements", settlement("t1", 1, spot="boom")),
                      item("settlements", settlement("t1", 2)))
    assert [k for k, _ in out] == ["quarantined", "stored"]
    assert "the floor failed on it: RuntimeError: a defect" in out[0][1]
    assert await count(db, "SELECT COUNT(*) FROM messages WHERE seq = 1") == 0  # rolled back whole


async def test_times_beyond_the_calendar_are_quarantined_not_raised(db: Database) -> None:
    """Before: ``0001-01-01T00:00:00+01:00`` raised OverflowError out of ``canonical_ts`` (in a message or
    in a status), which ended the consumer's task."""
    out = await apply(db, item("status", status("t1", ts="0001-01-01T00:00:00+01:00")),
                      item("settlements", settlement("t1", 1, ts="0001-01-01T00:00:00+01:00")),
                      item("settlements", settlement("t1", 2, ts="9999-12-31T23:59:59-01:00")),
                      item("settlements", settlement("t1", 3, ts="1969-12-31T23:59:59Z")),
                      item("settlements", settlement("t1", 4, ts="1970-01-01T00:00:00Z")))
    assert [k for k, _ in out] == ["status", "quarantined", "quarantined", "quarantined", "stored"], out
    assert all("is outside 1970-01-01 .. 8999-12-31" in r for _, r in out[1:4]), out


async def test_the_report_lists_the_days_with_data_not_every_day_between(db: Database) -> None:
    """Before: the report walked every gaming day from the earliest time stored to the latest, two queries
    per 300 days: a controller without a clock (1970) and one a year 8999 made it millions of queries (it
    never ended); ``--day 9999-12-31`` ended in an OverflowError traceback."""
    out = await apply(db, item("settlements", settlement("t1", 1, ts="1970-01-01T20:00:00Z")),
                      item("settlements", settlement("t1", 2, ts="8999-12-31T12:00:00Z")))
    assert [k for k, _ in out] == ["stored", "stored"]
    start = time.monotonic()
    kiritimati = GamingDay(6, "Pacific/Kiritimati")  # UTC-10:40 in 1970, +14 since 1995
    report = await asyncio.wait_for(build_report(db, kiritimati), 20)
    assert time.monotonic() - start < 10
    assert [(str(d.day), d.totals.handle) for d in report] == [("1970-01-01", 1000), ("8999-12-31", 1000)]
    if db.dialect == "sqlite":
        for day in ("9999-12-31", "0001-01-01"):
            r = subprocess.run([TABLESENSE, "floor", "report", "--database", db.url, "--day", day,
                                "--timezone", "Asia/Tokyo"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
            assert "is outside 1969-12-31 .. 9000-01-01" in r.stderr


async def test_a_status_the_database_cannot_hold_is_quarantined_not_retried_for_ever(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a status whose epoch was 6,000 characters (the table's own status topic) made the floor
    alarm key and seq_tracks' primary key too large for PostgreSQL's index: the batch failed, outside any
    message's savepoint, and was retried for ever. A status is applied in a savepoint of its own now."""
    out = await apply(db, item("status", status("t1", epoch=secrets.token_hex(3000), last_seq=5)),
                      item("alarms", alarm("t1", 1)))
    assert [k for k, _ in out] == ["quarantined", "stored"], out
    assert "is not a journal epoch" in out[0][1]

    async def broken(self: Ingestor, *args: Any) -> None:  # whatever else the database refuses
        from tablesense.daemon.floor.store import BadValue
        raise BadValue("out of range (test)")

    monkeypatch.setattr(Ingestor, "_apply_status", broken)
    out = await apply(db, item("status", status("t1", last_seq=5)), item("alarms", alarm("t1", 2)))
    assert out == [("quarantined", "the database cannot store it: out of range (test)"), ("stored", "")]


async def test_huge_figures_are_summed_exactly(db: Database) -> None:
    """Before: SQLite's SUM stops at 2**63 with 'integer overflow': 1,100 wagers at the money bound
    (2**53 - 1 minor units each, within a day's handle of a big table in a currency of small units) made
    the report fail and the floor page keep its old figures for every table."""
    m = 2**53 - 1
    win = dict(stake=m, outcome="win", category="player_win", bet="player", odds="1 to 1", net=m)
    loss = dict(stake=m, bet="player", net=-m)
    out = await apply(db, *(item("settlements", settlement("t1", i, **(win if i % 2 else loss)))
                            for i in range(1, 1101)))
    assert {k for k, _ in out} == {"stored"}
    [day] = await build_report(db, GamingDay(6, "UTC"))
    assert (day.totals.handle, day.totals.player_net) == (1100 * m, 0)
    assert [(w.bet, w.figures.handle) for w in day.wagers] == [("player", 1100 * m)]
    model = await page_model(db, GamingDay(6, "UTC"), datetime(2026, 12, 1, 13, tzinfo=UTC))
    assert model["tables"][0]["today"]["handle"] == "99079191802150901.00"


# ------------------------------------------------------------------------------------ who a message is


async def test_a_msg_id_must_name_the_table_and_the_seq_of_its_message(db: Database) -> None:
    """Before: ``msg_id`` (the primary key of every table's messages) was not checked against the table: a
    table could publish, on its own topic, the msg_id another table's message will have, which was then
    quarantined as MSG_ID_REUSED; a msg_id that named no seq was filed under the table's current epoch and
    took the place of the real message of that seq (SEQ_CONFLICT); an unbounded random part made a
    primary key too large for PostgreSQL's index."""
    await apply(db, item("status", status("t9")))
    victim = alarm("t8", 5)
    squat = alarm("t9", 5, msg_id=victim["msg_id"])
    garbage = alarm("t9", 3, msg_id="t9-whatever")
    long_id = alarm("t9", 6, msg_id=f"t9-{EPOCH}-6-{'a' * 5000}")
    other_seq = alarm("t9", 7, msg_id=f"t9-{EPOCH}-8-00000000")
    out = await apply(db, item("alarms", squat), item("alarms", garbage), item("alarms", long_id),
                      item("alarms", other_seq))
    assert [k for k, _ in out] == ["quarantined"] * 4, out
    assert "is not seq 5 of table 't9'" in out[0][1]
    out = await apply(db, item("alarms", victim), item("alarms", alarm("t9", 3)))
    assert [k for k, _ in out] == ["stored", "stored"], out
    codes = {c for (c,) in await db.fetchall("SELECT code FROM floor_alarms")}
    assert codes == {"QUARANTINED"}, codes


# ------------------------------------------------------------------------------------ settlements


async def test_settlements_no_daemon_can_make_are_quarantined(db: Database) -> None:
    """Before: every one of these was stored and counted in the handle and the win (a negative stake
    lowered the handle; a net of 10**12 on a 1000 stake paid out a fortune; an unknown bet went into the
    CSV report as written, '=HYPERLINK(...)' included)."""
    await apply(db, item("info", info("t1", 1)))
    hostile = [
        dict(stake=-5000, net=5000),  # a negative stake
        dict(stake=0, outcome="push", category="push", net=0),
        dict(outcome="win", category="banker_win", odds="1 to 1", net=10**12, commission=0),
        dict(outcome="win", category="banker_win", odds="1 to 1", net=1000, commission=50),
        dict(outcome="win", category="banker_win", odds="1 to 1", net=-1000, commission=2000),
        dict(outcome="win", category="banker_win", odds=None, net=1000),
        dict(outcome="win", category="banker_win", odds="lots", net=1000),
        dict(net=0),  # a loss that costs nothing
        dict(commission=50, net=-1050),  # commission on a loss
        dict(outcome="void", category="void", net=1000),
        dict(outcome="jackpot"),
        dict(bet="=HYPERLINK(\"http://x\")"),
        dict(bet="perfect_pairs", hand="middle"),
    ]
    genuine = [
        dict(outcome="win", category="banker_win", odds="1 to 1", net=950, commission=50),
        dict(bet="perfect_pairs", hand="player", stake=500, outcome="win", category="perfect_pair",
             odds="25 to 1", net=12500),
        dict(),  # a loss
        dict(outcome="push", category="tie", net=0),
        dict(outcome="void", category="void", net=0),
    ]
    out = await apply(db, *(item("settlements", settlement("t1", i, **kw))
                            for i, kw in enumerate([*hostile, *genuine], start=2)))
    kinds = [k for k, _ in out]
    assert kinds == ["quarantined"] * len(hostile) + ["stored"] * len(genuine), out
    assert all(r.startswith("settlement: ") for _, r in out[:len(hostile)]), out
    [day] = await build_report(db, GamingDay(6, "UTC"))
    assert (day.totals.handle, day.totals.house_win, day.totals.void_stake) == (3500, -12450, 1000)


# ------------------------------------------------------------------------------------ table info


async def _edges(db: Database) -> dict[int, str]:
    rows = await db.fetchall("SELECT seq, paytable FROM settlements WHERE bet = 'perfect_pairs' ORDER BY seq")
    return {int(s): str(p) for s, p in rows}


PP_WIN = dict(bet="perfect_pairs", hand="player", stake=500, outcome="lose", net=-500)


async def test_a_settlement_takes_the_paytable_of_the_info_before_it_whichever_process_stores_it(
        db: Database) -> None:
    """Before: each floor process kept the first rules it read for a table in memory for good: when the
    table changed its Perfect Pairs paytable (a new info at a new shoe), a process of the share group that
    did not receive that info stored the table's settlements under the old paytable and house edge for
    as long as it ran (a wrong theoretical win); a missed old info, replayed after the new one, put the
    old paytable back for the settlements after it, and in one batch with the newest info it took the
    table's row (currency, minor unit, paytables) back to itself."""
    one, two = Ingestor("tablesense", "floor-1"), Ingestor("tablesense", "floor-2")

    async def by(ing: Ingestor, *items: Incoming) -> None:
        async with db.transaction() as tx:
            assert {o.kind for o in await ing.apply(tx, list(items))} == {"stored"}

    pp_a = [{"bet": "perfect_pairs", "label": "Perfect Pairs", "paytable_name": "A", "min": 500, "max": 9000}]
    pp_b = [{**pp_a[0], "paytable_name": "B"}]
    await by(one, item("info", info("t1", 2, wagers=pp_a)))
    await by(two, item("settlements", settlement("t1", 3, **PP_WIN)))
    await by(one, item("info", info("t1", 4, shoe=2, wagers=pp_b)))  # the new shoe: paytable B
    await by(two, item("settlements", settlement("t1", 5, shoe=2, **PP_WIN)))
    assert await _edges(db) == {3: "A", 5: "B"}
    # the info of seq 1 (missed, paytable C) replayed now: it rules seq 1's successors up to seq 2 only
    await by(one, item("info", info("t1", 1, wagers=[{**pp_a[0], "paytable_name": "C"}])))
    await by(two, item("settlements", settlement("t1", 6, shoe=2, **PP_WIN)))
    assert await _edges(db) == {3: "A", 5: "B", 6: "B"}
    # a settlement stored before the info ruling it (dropped, replayed later) is corrected when it comes
    await by(two, item("settlements", settlement("t1", 8, shoe=3, **PP_WIN)))
    await by(one, item("info", info("t1", 7, shoe=3, wagers=[{**pp_a[0], "paytable_name": "25-12-5"}])))
    assert await _edges(db) == {3: "A", 5: "B", 6: "B", 8: "25-12-5"}
    edge = await db.fetchall("SELECT house_edge FROM settlements WHERE seq = 8")
    assert edge[0][0] == "33/415"
    # one batch holding the newest info and an older one replayed: the table keeps the newest
    await by(one, item("info", info("t1", 10, shoe=4, currency="USD", wagers=pp_b)),
             item("info", info("t1", 9, shoe=3, currency="EUR", wagers=pp_a)))
    row = await db.fetchall("SELECT info_seq, currency, paytables FROM tables WHERE table_id = 't1'")
    assert row[0] == (10, "USD", '{"perfect_pairs":"B"}')


async def test_a_table_info_outside_a_configs_bounds_is_quarantined(db: Database) -> None:
    """Before: a commission of '1e9999999' made every settlement of the table spend 8 s building a
    ten-million-digit integer in the event loop ('1e999999999': hours; the whole floor hung); a minor unit
    of -1 made the floor page and the report raise (money as floats: format '0-1d'); decks 2**31 broke
    PostgreSQL's INTEGER and jammed the batch; a currency '=1+1' went into the CSV report as written."""
    out = await apply(db, item("info", info("t1", 1, commission="1e9999999")),
                      item("info", info("t2", 1, minor_unit=-1)),
                      item("info", info("t3", 1, decks=2**31)),
                      item("info", info("t4", 1, currency="=1+1")),
                      item("info", info("t5", 1, game="poker")),
                      item("info", info("t6", 1, game="uth", decks=1, commission=None)))
    assert [k for k, _ in out] == ["quarantined"] * 5 + ["stored"], out
    start = time.monotonic()
    out = await apply(db, *(item("settlements", settlement(t, 2)) for t in ("t1", "t2", "t3", "t4", "t5")))
    assert time.monotonic() - start < 2
    assert [k for k, _ in out] == ["stored"] * 5
    now = datetime(2026, 12, 1, 13, tzinfo=UTC)
    model = await page_model(db, GamingDay(6, "UTC"), now)
    assert {t["table"]: t["today"]["handle"] for t in model["tables"] if t["today"]} == {
        t: "10.00" for t in ("t1", "t2", "t3", "t4", "t5")}


async def test_floor_alarms_of_a_table_that_never_stored_a_message_are_on_the_page(db: Database) -> None:
    """Before: the page listed the tables of the ``tables`` row only; a table all of whose messages were
    quarantined had none, so its QUARANTINED alarm was stored and logged but never shown."""
    out = await apply(db, Incoming("tablesense/t8/settlements", json.dumps(settlement("t9", 1)).encode()))
    assert [k for k, _ in out] == ["quarantined"]
    model = await page_model(db, GamingDay(6, "UTC"))
    rows = {t["table"]: t for t in model["tables"]}
    assert [a["code"] for a in rows["t8"]["alarms"]] == ["QUARANTINED"], rows
    assert rows["t8"]["state"] == "unknown"


async def test_the_page_model_carries_alarm_texts_cut_to_what_a_table_writes(db: Database) -> None:
    """Before: a table's alarm text went into the page model whole: alarms of 200 KB (the table's own
    topic; the broker lets 256 KiB through) made a model of megabytes, sent to every browser after every
    batch, of which the page shows 80 characters."""
    await apply(db, item("round", body("tablesense.round", "t1", 1, game="baccarat", phase="dealing")),
                *(item("alarms", alarm("t1", s, alarm_id=f"1.{s}", severity="critical", text="x" * 200_000))
                  for s in range(2, 12)))
    model = await page_model(db, GamingDay(6, "UTC"))
    assert len(model["tables"][0]["alarms"]) == 10
    assert len(json.dumps(model)) < 10_000


# ------------------------------------------------------------------------------------ replay replies


async def test_a_replay_reply_declares_lost_only_what_was_asked(db: Database) -> None:
    """Before: a reply's 'seq A..B no longer held (pruned)' was taken whole: '1..99999999999999999999'
    broke PostgreSQL's BIGINT (the reply was retried for ever, jamming the consumer) and a wide range
    marked seqs never asked for (future holes) as lost, so they were never asked; an answer on another
    table's reply topic was taken for this table's; the daemon's list form 'seq 4..5, 7..7 no longer held'
    was not read at all (asked again for ever, never SEQ_LOST); seqs the floor held inside a pruned range
    (a ranged request names them too) were declared lost with the rest, an alarm never cleared."""
    await apply(db, item("status", status("t1", last_seq=20)),
                *(item("alarms", alarm("t1", s)) for s in (1, 2, 3, 8, 9, 10, 20)))
    sent: list[ReplayRequest] = []

    async def send(r: ReplayRequest) -> None:
        sent.append(r)

    tracker = Tracker(db, send, "floor-t", grace=0.0)
    later = datetime.now(UTC) + timedelta(seconds=5)
    await tracker.audit(later)
    assert [(r.from_seq, r.to_seq) for r in sent] == [(4, 19)]
    cid = sent[0].command_id
    await tracker.on_reply(cid, json.dumps({"ok": True, "reason": "replaying 0 messages; seq 4..5, 7..7 "
                                            "no longer held (pruned)"}).encode())
    pruned = await db.fetchall("SELECT from_seq, to_seq FROM gaps WHERE state = 'pruned' ORDER BY from_seq")
    assert [(int(a), int(b)) for a, b in pruned] == [(4, 5), (7, 7)]
    reply = json.dumps({"ok": True, "command": "replay", "reason": "replaying 0 messages; seq "
                        "1..99999999999999999999 no longer held (pruned)"}).encode()
    await tracker.on_reply(cid, reply, "t2")  # on another table's reply topic: not an answer
    await tracker.on_reply("replay-never-asked", reply, "t1")
    await tracker.on_reply(cid, b"[" * 3000, "t1")
    assert await count(db, "SELECT COUNT(*) FROM gaps WHERE state = 'pruned'") == 2
    await tracker.on_reply(cid, reply, "t1")
    pruned = await db.fetchall("SELECT from_seq, to_seq FROM gaps WHERE state = 'pruned' ORDER BY from_seq")
    # cut to the 4..19 asked, less the 8..10 the floor holds (a ranged request names held seqs too)
    assert [(int(a), int(b)) for a, b in pruned] == [(4, 7), (7, 7), (11, 19)]
    texts = [t for (t,) in await db.fetchall("SELECT text FROM floor_alarms WHERE code = 'SEQ_LOST' AND "
                                             "state = 'raised' ORDER BY text")]
    assert [t.split(" of ")[0] for t in texts] == ["seq 11..19", "seq 4..7", "seq 7..7"], texts
    # correlation data with a NUL (PostgreSQL refused it in the update: the reply was retried for ever)
    await tracker.on_reply(cid + "\x00", json.dumps({"ok": False, "reason": "x"}).encode(), "t1")
    assert (await db.fetchall("SELECT reply_ok FROM replay_requests"))[0][0] in (True, 1)


@needs_broker
async def test_a_malformed_reply_does_not_stop_the_floor(db_url: str, broker: MosquittoBroker) -> None:
    """Before: a table could publish, on its own reply topic, 3,000 brackets without correlation data;
    reading the command id out of it raised RecursionError, which ended the consumer's task: nothing was
    stored after it."""
    service = FloorService(FloorSettings(broker.host, broker.port, client_id="floor-r"), FloorOptions(db_url))
    await service.start()
    try:
        await wait_for(lambda: service.consumer.connected, 10, "the floor to connect")
        good = settlement("t1", 1)
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
            await c.publish("tablesense/t1/reply/floor-r", b"[" * 3000, qos=1)
            await asyncio.sleep(0.5)
            await c.publish("tablesense/t1/settlements", json.dumps(good).encode(), qos=1)
        await wait_for(lambda: count(service.db, "SELECT COUNT(*) FROM messages WHERE msg_id = ?",
                                     (good["msg_id"],)), 20, "the message after the reply")
        assert not service._tasks[0].done()
    finally:
        await service.stop()


async def test_the_audit_leader_that_lost_its_database_session_steps_down(db_url: str) -> None:
    """Before: the audit's leader was whoever once took the PostgreSQL advisory lock, for good. The lock
    belongs to the database session: when that session went (the server restarted, a network cut, an
    administrator's pg_terminate_backend) the process reconnected still believing it led, while another
    process took the lock and led too: two processes asking every table for the same replays."""
    if not db_url.startswith("postgresql"):
        pytest.skip("the advisory lock is PostgreSQL's")
    import psycopg

    dbs = [open_database(db_url), open_database(db_url)]
    await migrate(dbs[0])
    one, two = (Tracker(d, None, f"floor-{i}") for i, d in enumerate(dbs, 1))
    try:
        await one.audit()
        await two.audit()
        assert (one.leader, two.leader) == (True, False)
        (pid,) = (await dbs[0].fetchall("SELECT pg_backend_pid()"))[0]
        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with contextlib.suppress(DatabaseError):
            await one.audit()  # the statement on the dead session fails; the next pass reconnects
        await two.audit()
        await one.audit()
        assert (one.leader, two.leader) == (False, True)
    finally:
        for d in dbs:
            await d.close()


async def test_a_batch_of_many_tables_is_committed_with_its_notifications(db_url: str) -> None:
    """Before: the PostgreSQL NOTIFY after a batch named every table it touched in one payload; 256
    messages from 256 tables with ids of 40 characters (a floor of a few hundred tables after a
    reconnect) made it longer than PostgreSQL's 8000 bytes, the batch's transaction failed and was
    retried for ever: the floor stopped."""
    from tablesense.daemon.floor.consumer import FloorConsumer, _notify_payloads

    db = open_database(db_url)
    await migrate(db)
    consumer = FloorConsumer(FloorSettings("127.0.0.1", 1, client_id="floor-n"), db)
    tables = [f"casino-east-wing-baccarat-table-{i:04d}-x" for i in range(256)]
    try:
        items = [item("alarms", alarm(t, 1)) for t in tables]
        outcomes = await asyncio.wait_for(consumer._commit(items), 20)
        assert {o.kind for o in outcomes} == {"stored"} and consumer.db_failures == 0
        payloads = _notify_payloads(outcomes)
        assert len(payloads) > 1 and all(len(p.encode()) < 8000 for p in payloads)
        named = {t: r for p in payloads for t, r in json.loads(p)["tables"].items()}
        assert named == {t: [[EPOCH, 1, 1]] for t in tables}
    finally:
        await db.close()


async def test_a_value_the_database_refuses_at_the_batch_level_is_isolated(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a value the database refuses outside a message's savepoint (the per-table rows written
    once per batch; none is known to fail now) failed the batch, which was retried for ever. Now the batch
    is stored one message at a time and the one that fails alone is quarantined."""
    from tablesense.daemon.floor.consumer import FloorConsumer
    from tablesense.daemon.floor.store import BadValue

    real = Ingestor._apply_delta

    async def delta(self: Ingestor, tx: Any, table: str, d: Any) -> None:
        if table == "t-bad":
            raise BadValue("out of range (test)")
        await real(self, tx, table, d)

    monkeypatch.setattr(Ingestor, "_apply_delta", delta)
    db = open_database(db_url)
    await migrate(db)
    consumer = FloorConsumer(FloorSettings("127.0.0.1", 1, client_id="floor-b"), db)
    try:
        items = [item("alarms", alarm(t, 1)) for t in ("t1", "t-bad", "t2")]
        outcomes = await asyncio.wait_for(consumer._commit(items), 20)
        assert [o.kind for o in outcomes] == ["stored", "quarantined", "stored"]
        assert outcomes[1].reason == "the database cannot store it: out of range (test)"
        assert await count(db, "SELECT COUNT(*) FROM messages") == 2
    finally:
        await db.close()


async def test_the_page_listener_gives_up_on_a_database_that_never_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A database host that accepts the connection and never answers (a hung server, a half-open
    firewall): the floor page's LISTEN connection gives up after its connect timeout and the page falls
    back to polling. Before, it waited for ever and the page stopped refreshing."""
    from tablesense.daemon.floor import web as floor_web

    monkeypatch.setattr(floor_web, "LISTEN_CONNECT_TIMEOUT", 1)
    accepted: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # never a byte back

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    page = floor_web.FloorPage(f"postgresql://postgres@127.0.0.1:{port}/floor", GamingDay(6, "UTC"))
    try:
        with pytest.raises(Exception) as caught:
            await asyncio.wait_for(page._listen(), 20)
        assert not isinstance(caught.value, TimeoutError), "the LISTEN connection waited for ever"
        assert accepted  # it did reach the silent server
    finally:
        for w in accepted:
            w.close()
        server.close()
        await page.db.close()
