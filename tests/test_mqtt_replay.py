"""Replay by seq: a broker crash loses messages the journal marks delivered; the floor finds the gap by
``seq`` and the retained status's ``last_seq`` and gets every message back with ``cmd/replay``.

The tester's finding: with the shipped persistence settings (``autosave_interval 60``), a floor
subscriber offline for 10 s and a broker SIGKILL, 341 messages (108 settlements, 24 floor records) never
reached the floor, all marked delivered and never republished. A PUBACK means the broker had a message,
not that the floor did. Now the daemon republishes journaled messages on request, unchanged (original
``seq`` and ``msg_id``), on ``{prefix}/{table}/replay/...``, QoS 1, never retained, in seq order.

The full scenario runs ``tablesense run`` (a subprocess) with the simulated baccarat table on ptys and a
Mosquitto configured with the persistence lines of ``deploy/mosquitto/tablesense-tls.conf`` as
shipped; the floor is a persistent-session subscriber (tests/faults/harness.py) plus the gap logic a
floor system runs (:func:`missing_seqs`).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import random
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import command_support
import pytest
from command_support import body, request
from faults.harness import DaemonProc, Dealer, Subscriber, journal_rows, wait_until
from machine_support import baccarat_config
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from test_command_hardening import Feed, live_round

from tablesense.daemon.app import App, CommandRateLimit
from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import parse_config
from tablesense.daemon.mqtt import CommandRejected
from tablesense.daemon.mqtt_commands import MAX_REPLAY_SPAN
from tablesense.daemon.table.inputs import RESEND_WINDOW
from tablesense.drivers.events import Heartbeat
from tablesense.simulators.dealer import SimTable, sim_config_toml

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "mosquitto"
GUARD_S = 30.0


def shipped_persistence(data: Path) -> str:
    """The queueing and persistence lines of the shipped production broker config, verbatim but for the
    directory (``autosave_interval 60``: queues are saved once a minute and at a clean shutdown)."""
    keep = ("persistence ", "autosave_interval ", "max_queued_messages ", "max_inflight_messages ",
            "persistent_client_expiration ", "message_size_limit ")
    lines = [ln for ln in (DEPLOY / "tablesense-tls.conf").read_text().splitlines() if ln.startswith(keep)]
    assert "autosave_interval 60" in lines and "persistence true" in lines, lines
    data.mkdir(parents=True, exist_ok=True)
    return "\n".join([*lines, f"persistence_location {data}/"])


def missing_seqs(seen: set[int], last_seq: int) -> list[tuple[int, int]]:
    """What a floor system asks for: the runs of seqs up to the highest it knows of (the status's
    ``last_seq`` or the highest message) that it never received, as inclusive ranges of at most
    :data:`MAX_REPLAY_SPAN`."""
    top = max([last_seq, *seen])
    runs: list[tuple[int, int]] = []
    for n in range(1, top + 1):
        if n in seen:
            continue
        if runs and runs[-1][1] == n - 1 and n - runs[-1][0] < MAX_REPLAY_SPAN:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def journal_payloads(directory: Path) -> dict[int, bytes]:
    """``seq -> payload`` of every message the sealed journal holds (verified against its seal)."""
    from journal_support import sealed_rows

    from tablesense.daemon.journal.seal import MessageRow

    return {r.seq: bytes(r.payload) for r in sealed_rows(directory) if isinstance(r, MessageRow)}


async def ask_replay(host: str, port: int, base: str, runs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Send one ``replay`` per run (floor-style: response topic under reply/, correlation data, a command
    id, issued now) and return the answers in order."""
    answers: dict[bytes, dict[str, Any]] = {}
    async with aiomqtt.Client(host, port, protocol=aiomqtt.ProtocolVersion.V5, identifier="floor-cmd") as c:
        await c.subscribe(f"{base}/reply/floor", qos=1)
        for i, (a, b) in enumerate(runs):
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.ResponseTopic = f"{base}/reply/floor"
            props.CorrelationData = str(i).encode()
            await c.publish(f"{base}/cmd/replay", body("floor-1", {"from_seq": a, "to_seq": b}), qos=1,
                            properties=props)
        async with asyncio.timeout(GUARD_S):
            async for m in c.messages:
                assert m.properties is not None
                answers[bytes(m.properties.CorrelationData)] = json.loads(m.payload)  # type: ignore[arg-type]
                if len(answers) == len(runs):
                    break
    return [answers[str(i).encode()] for i in range(len(runs))]


@pytest.mark.faults
@pytest.mark.timeout(300)
async def test_broker_crash_the_floor_finds_the_gap_and_recovers_every_message_by_replay(
        tmp_path: Path) -> None:
    broker = MosquittoBroker(tmp_path / "broker", persistence=False,
                             extra=shipped_persistence(tmp_path / "broker" / "data"))
    broker.start()
    dev, journal = tmp_path / "dev", tmp_path / "journal"
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host=broker.host, port=broker.port, journal=journal)
    cfg_path = tmp_path / "table.toml"
    cfg_path.write_text(text)
    config = parse_config(text)
    base = f"tablesense/{config.table}"
    sim = SimTable(config, dev, seed=303, ack_timeout=60.0)
    for runner in (sim.shoe_runner, sim.pads_runner):
        runner.resend_fallback = 60.0
    await sim.start()
    floor = Subscriber(broker.host, broker.port, f"{base}/#", "floor-1")
    await asyncio.to_thread(floor.start)
    daemon = DaemonProc(cfg_path, tmp_path / "daemon.log")
    daemon.start()
    floor2: Subscriber | None = None
    try:
        await sim.wait_host(30)
        dealer = Dealer(sim, gap=0.05).start()
        await dealer.wait_rounds(3, 60)
        started = time.monotonic()
        floor.stop()  # the floor system is away for 10 s; the broker queues for its session (in memory)
        await asyncio.sleep(10)
        at_kill = len(sim.rounds)
        assert time.monotonic() - started < 50  # before the broker's first autosave (60 s)
        broker.stop(kill=True)  # SIGKILL: what was queued since the last save is gone
        await asyncio.sleep(1)
        broker.start()
        floor2 = Subscriber(broker.host, broker.port, f"{base}/#", "floor-1")
        await asyncio.to_thread(floor2.start)
        await dealer.wait_rounds(at_kill + 3, 120)
        await dealer.stop()
        await wait_until(lambda: all(r[3] for r in journal_rows(journal)), 60, "every row acknowledged")
        rows = journal_rows(journal)

        # The floor's view: what it got (both sessions), de-duplicated by msg_id, and the status.
        def got() -> dict[str, int]:
            assert floor2 is not None
            return {g.msg_id: g.seq for g in floor.snapshot() + floor2.snapshot() if g.msg_id}
        await wait_until(lambda: any(g.topic == f"{base}/status" and g.body.get("state") == "online"
                                     for g in floor2.snapshot()), 30, "the status after the restart")
        status = [g.body for g in floor2.snapshot() if g.topic == f"{base}/status"][-1]
        # the birth message of `tablesense run`: what software, which config, which journal, how far
        assert status["software"] == importlib.metadata.version("tablesense")
        assert status["config_digest"] == hashlib.sha256(cfg_path.read_bytes()).hexdigest()
        assert re.fullmatch(r"[0-9a-f]{16}", status["instance"])
        assert all(f"-{status['epoch']}-" in r[1] for r in journal_rows(journal))
        assert 0 < status["last_seq"] <= journal_rows(journal)[-1][0]
        assert 0 <= status["chain_seq"] <= status["last_seq"]
        await wait_until(lambda: max(got().values()) >= rows[-1][0], 30, "the latest messages live")
        lost = {r[1] for r in rows} - set(got())
        lost_settlements = sum(1 for r in rows if r[1] in lost and r[2] == "settlements")
        lost_floor = sum(1 for r in rows if r[1] in lost and r[2] == "floor/rounds")
        assert lost and all(r[3] for r in rows if r[1] in lost), \
            "the scenario lost nothing (the defect's precondition): every lost row is marked delivered"
        runs = missing_seqs(set(got().values()), int(status["last_seq"]))
        assert {n for a, b in runs for n in range(a, b + 1)} == {r[0] for r in rows if r[1] in lost}

        answers = await ask_replay(broker.host, broker.port, base, runs)
        for (a, b), answer in zip(runs, answers, strict=True):
            assert answer["ok"] and answer["reason"] == f"replaying {b - a + 1} messages seq {a}..{b}", answer
        await wait_until(lambda: {r[1] for r in rows} <= set(got()), 60, "every message recovered")
    finally:
        daemon.cleanup()
        floor.stop()
        if floor2 is not None:
            floor2.stop()
        await sim.close()
        broker.stop()
    # the replayed messages: on replay/<channel path>, in seq order, byte for byte what was journaled
    payloads = journal_payloads(journal)
    replayed = [g for g in floor2.snapshot() if "/replay/" in g.topic]
    assert sorted({g.msg_id for g in replayed}) == sorted(lost)
    assert [g.seq for g in replayed] == sorted(g.seq for g in replayed)
    by_seq = {r[0]: r for r in rows}
    for g in replayed:
        assert not g.retain
        assert g.body == json.loads(payloads[g.seq]) and g.msg_id == by_seq[g.seq][1]
        assert g.topic == f"{base}/replay/{by_seq[g.seq][2]}" or g.topic.startswith(f"{base}/replay/devices/")
    result = {"journal_messages": len(rows), "lost_in_broker_crash": len(lost),
              "lost_settlements": lost_settlements, "lost_floor_records": lost_floor,
              "replay_requests": len(runs), "recovered": len(lost)}
    print(f"\nREPLAY-RESULT {json.dumps(result)}")


# ------------------------------------------------------------------------------------ the command itself

SHOE: list[str] = []


def shuffle_shoe() -> None:
    """Refill :data:`SHOE` with a shuffled 8-deck shoe (each table fixture deals from a fresh one)."""
    SHOE[:] = [f"{r}{s}" for _ in range(8) for r in "A23456789TJQK" for s in "SHDC"]
    random.Random(11).shuffle(SHOE)


async def deal_rounds(app: App, feed: Feed, n: int) -> None:
    """Deal the round in play to its end, then ``n - 1`` more (cards from a shuffled 8-deck shoe)."""
    assert app.machine is not None
    for i in range(n):
        while app.machine.phase.value != "complete":
            assert await feed.card(SHOE.pop())
        if i < n - 1:
            await next_round(feed)


async def next_round(feed: Feed) -> None:
    assert await feed.bet("1P", 500)
    assert await feed.no_more_bets()


async def quiet(app: App, feed: Feed) -> None:
    """A quiet spell: the heartbeats both devices send whenever quiet for 2 s (docs/protocol.md §3), in
    one group commit. After a replay's start, enough of them that a rebuilt machine no longer needs the
    devices' frames from before it (``Journal.devices_before_replay``), which retention keeps meanwhile."""
    assert await app._process_devices([Heartbeat(device, feed._next(device))
                                       for _ in range(2 * RESEND_WINDOW) for device in ("shoe", "pads")])


async def new_shoe(app: App, shoe: int) -> None:
    ok, reason = await app._on_command(request("new_shoe", {"shoe": shoe}))
    assert ok, reason


@pytest.fixture
async def table(tmp_path: Path) -> AsyncIterator[tuple[App, MosquittoBroker, Feed]]:
    """The daemon (App) with 10-round retention on a journal of ~50 dealt rounds, pruned, and connected
    to a Mosquitto the test owns (prefix ``tr``, table ``t1``)."""
    broker = MosquittoBroker(tmp_path / "broker")
    broker.start()
    config = baccarat_config(extra=f'[journal]\ndirectory = "{tmp_path / "journal"}"\n'
                                   'retention_rounds = 10\nretention_days = 0\n'
                                   f'[mqtt]\nhost = "{broker.host}"\nport = {broker.port}\n'
                                   'topic_prefix = "tr"\n')
    app = App(config)
    app.open()
    shuffle_shoe()
    feed = await live_round(app)
    await deal_rounds(app, feed, 40)  # shoe 1: older than the last 10 rounds (+ one archive unit of 16)
    for shoe, rounds in ((1, 2), (2, 1)):
        await new_shoe(app, shoe)
        await quiet(app, feed)  # heartbeats: the devices' frames before the replay are not needed
        await next_round(feed)
        await deal_rounds(app, feed, rounds)
    while app._prune_task is not None and not app._prune_task.done():
        # the app's own maintenance, due while dealing, ends before the relay delivers: else its
        # retention could delete the delivered rows before the prune below does (CI, a loaded machine)
        await asyncio.wait({app._prune_task})
    # no device links: the inputs come from ``feed``, and links to the config's /dev/null would journal
    # device states at their own pace (open failures, retried with backoff), moving the last seq under
    # the tests (seen once the relay delivered fast enough to empty the outbox before the first of them)
    app.links.clear()
    task = asyncio.create_task(app.run())
    try:
        await wait_until(lambda: app.relay is not None and app.relay.connected, 20, "connected")
        assert app.journal is not None
        await wait_until(lambda: app.journal is not None and app.journal.pending_count() == 0, 30,
                         "every row delivered (retention deletes only delivered rows)")
        assert await asyncio.to_thread(app.journal.prune) > 0
        yield app, broker, feed
    finally:
        app.stop()
        await asyncio.wait_for(task, 20)
        broker.stop()


async def test_replay_republishes_what_is_held_and_names_what_is_not(
        table: tuple[App, MosquittoBroker, Feed]) -> None:
    app, broker, _ = table
    assert app.journal is not None and app.relay is not None
    last = app.journal.last_seq
    held = [r.seq for r in app.journal.messages_by_seq(1, last, 100_000)]
    assert len(held) < last, "retention pruned nothing"
    gone = sorted(set(range(1, last + 1)) - set(held))
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5) as watcher:
        await watcher.subscribe("tr/t1/replay/#", qos=1)
        [answer] = await ask_replay(broker.host, broker.port, "tr/t1", [(1, last + 5)])
        got: list[aiomqtt.Message] = []
        async with asyncio.timeout(GUARD_S):
            async for m in watcher.messages:
                got.append(m)
                if len(got) == len(held):
                    break
    assert answer["ok"], answer
    reason = answer["reason"]
    assert reason.startswith(f"replaying {len(held)} messages seq {held[0]}..{held[-1]}; seq "), reason
    assert f"{gone[0]}.." in reason and "no longer held (pruned)" in reason
    assert reason.endswith(f"; seq {last + 1}..{last + 5} not journaled yet (last seq {last})")
    bodies = [json.loads(m.payload) for m in got]  # type: ignore[arg-type]
    assert [b["seq"] for b in bodies] == held  # in order, every held row once
    rows = {r.seq: r for r in app.journal.messages_by_seq(1, last, 100_000)}
    for m, b in zip(got, bodies, strict=True):
        row = rows[b["seq"]]
        assert m.payload == row.payload and b["msg_id"] == row.msg_id and not m.retain
        suffix = {"devices": f"devices/{row.device}", "floor/rounds": "floor/rounds"}.get(row.channel,
                                                                                        row.channel)
        assert str(m.topic) == f"tr/t1/replay/{suffix}"
    assert app.relay.replayed == len(held)


async def test_replay_is_bounded_rate_limited_and_applied_once(
        table: tuple[App, MosquittoBroker, Feed]) -> None:
    app, _, _ = table
    assert app.journal is not None and app.relay is not None
    last = app.journal.last_seq
    ok, reason = await app._on_command(request("replay", {"from_seq": last + 1, "to_seq": last + 9}))
    assert not ok
    assert reason == f"nothing to replay: seq {last + 1}..{last + 9} not journaled (last seq {last})"
    req = request("replay", {"from_seq": last - 2, "to_seq": last})
    first = await app._on_command(req)
    assert first == (True, f"replaying 3 messages seq {last - 2}..{last}")
    await wait_until(lambda: app.relay is not None and app.relay.replayed == 3, 20, "the replay")
    assert await app._on_command(req) == first  # the same command id: the first answer, no second replay
    assert app.relay.replay_backlog == 0 and app.relay.replayed == 3
    with pytest.raises(CommandRejected, match="at most 10000 seqs per replay"):
        request("replay", {"from_seq": 1, "to_seq": MAX_REPLAY_SPAN + 1})
    old = request("replay", {"from_seq": 1, "to_seq": 2}, issued_at=command_support.now_iso(-60))
    ok, reason = await app._on_command(old)
    assert not ok and reason.startswith("expired")
    app.command_limit = CommandRateLimit(rate=1, burst=1, clock=lambda: 0.0)
    assert (await app._on_command(request("replay", {"from_seq": 1, "to_seq": 2})))[0]
    ok, reason = await app._on_command(request("replay", {"from_seq": 1, "to_seq": 2}))
    assert not ok and reason.startswith("rate limited")
