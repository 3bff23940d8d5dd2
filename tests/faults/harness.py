"""Fault-injection harness: a Mosquitto the test owns, a loopback TCP proxy that can cut the link
silently, a persistent-session subscriber in its own thread, ``tablesense run`` as a subprocess, and the
checks every scenario makes.

Every scenario ends with :meth:`Rig.verify`, which compares three independent accounts of the run:

* what the simulators dealt (cards and wagers per round, :class:`~simulators.dealer.SimTable.rounds`),
  settled independently by ``tablesense settle``'s logic (:func:`daemon.commands.settle.settle_document`);
* the daemon's journal (its outbox: every message it ever meant to publish, with ``seq`` and ``msg_id``),
  read through a separate read-only SQLite connection;
* what the subscriber received, raw (duplicates included) and de-duplicated by ``msg_id``.

and asserts: zero lost settlements (and none extra), zero distinct ``msg_id`` missing, nothing received that
the journal does not hold, per-table ``seq`` strictly increasing after de-duplication, floor records
carrying exactly the dealt cards, and no daemon crash. It prints one ``FAULTS-RESULT`` line and writes
``results.json`` into the test's temp directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.broker import MosquittoBroker
from tablesense.daemon.cli import UsageError
from tablesense.daemon.commands.settle import settle_document
from tablesense.daemon.config import TableConfig, parse_config
from tablesense.simulators.dealer import DealtRound, SimTable, sim_config_toml

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
_FIELDS = ("stake", "outcome", "category", "odds", "net", "commission")


async def wait_until(pred: Callable[[], bool], timeout: float, what: str, step: float = 0.02) -> None:
    """Poll ``pred`` until true; ``AssertionError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(step)


# ---------------------------------------------------------------------------------------------- proxy


@dataclass
class _Pair:
    """One proxied connection; ``severed``: restored away (never forward or close the broker side)."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None
    severed: bool = False


class LinkProxy:
    """A loopback TCP proxy in front of the broker whose link can be cut *silently*.

    :meth:`cut`: from now on bytes are read from both sides and dropped; no socket is closed, so neither
    the daemon nor the broker sees a FIN or RST (as when a switch or a cable between them dies). New
    connections made while cut are accepted and black-holed the same way. :meth:`restore`: the daemon
    side of every connection made before or during the cut is closed (the client's socket finally
    errors), the broker side is left open and silent (the broker finds out only by keepalive expiry or
    when the client takes its session over), and new connections are forwarded again.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.host = "127.0.0.1"
        self.port = 0
        self.cut_active = False
        self.connections = 0
        self.dropped_bytes = 0
        self._server: asyncio.Server | None = None
        self._pairs: list[_Pair] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.cut_active:
            pair = _Pair(writer, None)
            self._pairs.append(pair)
            self._spawn(self._pump(reader, None, pair))
            return
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        pair = _Pair(writer, up_w)
        self._pairs.append(pair)
        self._spawn(self._pump(reader, up_w, pair))
        self._spawn(self._pump(up_r, writer, pair))

    def _spawn(self, coro: Any) -> None:
        t = asyncio.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None,
                    pair: _Pair) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                if self.cut_active or writer is None or pair.severed:
                    self.dropped_bytes += len(data)
                    continue
                writer.write(data)
                await writer.drain()
            if writer is not None and not self.cut_active and not pair.severed:
                writer.close()

    def cut(self) -> None:
        """Stop forwarding in both directions without closing anything."""
        self.cut_active = True

    def restore(self) -> None:
        """Close the client side of every old connection; forward new connections again."""
        for pair in self._pairs:
            if not pair.severed:
                pair.severed = True  # the broker side stays open and silent
                with contextlib.suppress(OSError):
                    pair.client.transport.abort()
        self.cut_active = False

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in self._pairs:
            for w in (pair.client, pair.upstream):
                if w is not None:
                    with contextlib.suppress(OSError):
                        w.transport.abort()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


# ---------------------------------------------------------------------------------------------- subscriber


@dataclass(frozen=True)
class Got:
    """One message as the subscriber received it (raw, duplicates included)."""

    topic: str
    body: dict[str, Any]
    msg_id: str
    seq: int
    retain: bool
    dup: bool
    mid: int


class Subscriber:
    """A persistent-session MQTT v5 subscriber (fixed client id, ``clean_start=False``, session expiry
    1 h, QoS 1) running in paho's own network thread, so it keeps receiving whatever the test's event
    loop is doing. It subscribes only when the broker has no session for it (``session_present`` false),
    so a reconnect does not re-trigger retained deliveries; QoS 1 messages queued while it was away are
    delivered by the broker on reconnect. Records every message in :attr:`got`."""

    def __init__(self, host: str, port: int, topic_filter: str, client_id: str) -> None:
        self.host, self.port, self.filter = host, port, topic_filter
        self.got: list[Got] = []
        self.connects = 0
        self.subscribed = threading.Event()
        self._lock = threading.Lock()
        self._client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
        self._client.reconnect_delay_set(min_delay=1, max_delay=1)
        self._client.on_connect = self._on_connect
        self._client.on_message = self._on_message
        self._client.on_subscribe = lambda *a: self.subscribed.set()

    def _on_connect(self, client: paho.Client, _u: Any, flags: Any, rc: Any, _p: Any) -> None:
        if rc.is_failure:
            return
        self.connects += 1
        if not flags.session_present:
            client.subscribe(self.filter, qos=1)

    def _on_message(self, _c: paho.Client, _u: Any, m: paho.MQTTMessage) -> None:
        try:
            body = json.loads(m.payload) if m.payload else {}
        except ValueError:
            body = {"_raw": m.payload.decode(errors="replace")}
        if not isinstance(body, dict):
            body = {"_raw": body}
        g = Got(m.topic, body, str(body.get("msg_id") or ""), int(body.get("seq") or 0), bool(m.retain),
                bool(m.dup), int(m.mid))
        with self._lock:
            self.got.append(g)

    def start(self) -> None:
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        self._client.connect(self.host, self.port, keepalive=10, clean_start=False, properties=props)
        self._client.loop_start()
        if not self.subscribed.wait(10):
            raise AssertionError("subscriber never subscribed")

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def snapshot(self) -> list[Got]:
        with self._lock:
            return list(self.got)

    def distinct_ids(self) -> set[str]:
        return {g.msg_id for g in self.snapshot() if g.msg_id}

    def first_of_each(self) -> list[Got]:
        """Messages with a ``msg_id``, de-duplicated (first arrival kept), in arrival order."""
        seen: set[str] = set()
        out = []
        for g in self.snapshot():
            if g.msg_id and g.msg_id not in seen:
                seen.add(g.msg_id)
                out.append(g)
        return out

    def on(self, suffix: str) -> list[Got]:
        return [g for g in self.first_of_each() if g.topic.endswith("/" + suffix)]

    def retained_status(self) -> list[str]:
        return [str(g.body.get("state")) for g in self.snapshot() if g.topic.endswith("/status")]


# ---------------------------------------------------------------------------------------------- daemon


class DaemonProc:
    """``tablesense run --config FILE`` as a subprocess. Its output goes through a pipe (drained by a
    thread into ``log``), so a file-size limit on the daemon (``fsize``: bytes, ``RLIMIT_FSIZE`` set in
    the child) applies to its journal and nothing else. ``exits`` keeps every exit status."""

    def __init__(self, config: Path, log: Path, fsize: int | None = None) -> None:
        self.config, self.log, self.fsize = config, log, fsize
        self.proc: subprocess.Popen[bytes] | None = None
        self.exits: list[int] = []
        self.starts = 0
        self._drain: threading.Thread | None = None

    def _preexec(self) -> None:
        if self.fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.fsize, self.fsize))

    def start(self) -> None:
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        self.proc = subprocess.Popen([TABLESENSE, "run", "--config", str(self.config)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env,
                                     preexec_fn=self._preexec if self.fsize is not None else None)
        self.starts += 1
        out = self.proc.stdout
        assert out is not None

        def drain() -> None:
            with open(self.log, "ab") as f:
                for line in out:
                    f.write(line)
                    f.flush()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _reap(self, timeout: float) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        if self._drain is not None:
            self._drain.join(5)
        self.exits.append(rc)
        return rc

    def kill(self) -> int:
        """SIGKILL; returns the exit status (``-9``). Raises if the daemon had already died."""
        assert self.running, "the daemon had died before it was killed:\n" + self.tail()
        assert self.proc is not None
        self.proc.kill()
        return self._reap(10)

    async def terminate(self, timeout: float = 5.0) -> int:
        """SIGTERM and wait up to ``timeout`` s (the issue's bound) for the exit status."""
        assert self.running, "the daemon had died before SIGTERM:\n" + self.tail()
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self._reap, timeout)

    def cleanup(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.kill()
            self._reap(10)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def events(self, name: str) -> int:
        """How many log lines carry ``"event":"name"``."""
        return self.text().count(f'"event":"{name}"')

    def tail(self, n: int = 3000) -> str:
        return self.text()[-n:]


# ---------------------------------------------------------------------------------------------- journal


def journal_rows(directory: Path) -> list[tuple[int, str, str, int]]:
    """``(seq, msg_id, channel, delivered)`` of every message the journal holds, read and verified
    against its seal through a read-only connection (one snapshot)."""
    from journal_support import sealed_messages

    return sealed_messages(directory)


def journal_cards(directory: Path) -> list[str]:
    """Every card of the shoe's ``CardDrawn`` inputs in the journal, in order (read and verified against
    the journal's seal through a read-only connection)."""
    from journal_support import sealed_rows

    from tablesense.daemon.journal.seal import InputRow

    out = []
    for row in sealed_rows(directory):
        if isinstance(row, InputRow) and row.kind == "CardDrawn":
            card = json.loads(row.payload)["card"]
            rank = {1: "A", 11: "J", 12: "Q", 13: "K"}.get(card["rank"], str(card["rank"]))
            out.append(f"{rank}{card['suit']}")
    return out


# ---------------------------------------------------------------------------------------------- the rig


def settlement_key(body: dict[str, Any], baccarat: bool) -> tuple[Any, ...]:
    where = body["spot"] if baccarat else body["seat"]
    return (where, body["bet"], body["hand"], *(body[f] for f in _FIELDS))


def expected_two_card_settlements(sim: SimTable, rnd: DealtRound) -> list[tuple[Any, ...]]:
    """For a baccarat coup cut short after its 4th card, before the round was complete: the settlements
    of its two-card wagers (Perfect Pairs, House Money: decided by each hand's first two cards, 58 Pa.
    Code § 627c.1 and § 631a.8), which the daemon settles at the 4th card. ``tablesense settle`` takes only
    complete coups, so the first four cards are followed by filler cards until the third-card rule is
    satisfied; the two-card wagers never look past the 4th card."""
    req = sim.settle_request(rnd)
    req["wagers"] = [w for w in req["wagers"] if w["bet"] in ("perfect_pairs", "house_money")]
    if not req["wagers"]:
        return []
    first_four = req["cards"][:4]
    for filler in ([], ["2C"], ["2C", "2D"]):
        try:
            out = settle_document(json.dumps({**req, "cards": first_four + filler}))["wagers"]
        except UsageError:
            continue
        return sorted((w["spot"], w["bet"], w["hand"], *(w[f] for f in _FIELDS)) for w in out)
    raise AssertionError(f"no filler completes a coup starting {first_four}")


def expected_settlements(sim: SimTable, rnd: DealtRound) -> list[tuple[Any, ...]]:
    """The settlements ``tablesense settle`` computes for the cards and wagers the simulators dealt."""
    out = settle_document(json.dumps(sim.settle_request(rnd)))["wagers"]
    return sorted((w["spot"], w["bet"], w["hand"], *(w[f] for f in _FIELDS)) for w in out)


@dataclass
class Rig:
    """One scenario's world: broker, optional proxy, subscriber, simulated table, daemon."""

    tmp: Path
    broker: MosquittoBroker
    config: TableConfig
    config_path: Path
    sim: SimTable
    sub: Subscriber
    daemon: DaemonProc
    proxy: LinkProxy | None = None
    journal_dir: Path = field(default_factory=Path)
    started: float = field(default_factory=time.monotonic)
    notes: dict[str, Any] = field(default_factory=dict)

    def from_memory_alarms(self) -> list[Got]:
        """Alarms the daemon published from memory, by design outside the journal (``seq`` 0): the
        critical ``INTERNAL_ERROR`` of a failing journal (once per failing spell; the spell is journaled
        once the journal works again) and ``JOURNAL_DAMAGED``. They are real and reach the floor when the
        broker is reachable, but whether one does depends on the connection at that moment, so they are
        not part of the journal-versus-subscriber comparison. Any other message without a journal row
        fails :meth:`verify`."""
        return [g for g in self.sub.first_of_each()
                if g.topic.endswith("/alarms") and g.seq == 0 and g.body.get("alarm_id") == "journal"
                and g.body.get("code") in ("INTERNAL_ERROR", "JOURNAL_DAMAGED")]

    def restart_daemon(self) -> None:
        """Start the daemon again (same config, journal and log)."""
        self.daemon.start()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the latest daemon start has replayed its journal and installed its signal handlers
        (its ``daemon_ready`` log line)."""
        await wait_until(lambda: self.daemon.events("daemon_ready") >= self.daemon.starts, timeout,
                         "the daemon to be ready")

    async def replug_devices(self) -> None:
        """Unplug and replug both simulated devices (used while the daemon is down): on the next host
        contact each resends every frame after the last one the daemon acknowledged."""
        for runner in (self.sim.shoe_runner, self.sim.pads_runner):
            await runner.unplug()
            await runner.replug()

    async def settled_through_journal(self, timeout: float = 120.0) -> None:
        """Wait until every outbox row the journal holds has reached the subscriber."""
        def done() -> bool:
            ids = {r[1] for r in journal_rows(self.journal_dir)}
            return ids <= self.sub.distinct_ids()
        try:
            await wait_until(done, timeout, "every journaled message at the subscriber", step=0.1)
        except AssertionError as exc:
            got = self.sub.distinct_ids()
            missing = [r for r in journal_rows(self.journal_dir) if r[1] not in got]
            raise AssertionError(f"{exc}: {len(missing)} of them missing (seq, msg_id, channel, delivered): "
                                 f"{missing[:10]}; subscriber connects {self.sub.connects}, "
                                 f"received {len(self.sub.snapshot())}") from None

    def verify(self, scenario: str, *, complete_rounds: list[DealtRound] | None = None,
               partial: DealtRound | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The checks every scenario makes (module docstring). ``complete_rounds``: rounds that must be
        fully settled (default: all the simulator dealt). ``partial``: a round that was cut short; its
        settlements may be fewer but each must be one the rules give for its dealt cards."""
        rounds = self.sim.rounds if complete_rounds is None else complete_rounds
        baccarat = self.config.game in ("baccarat", "ez-baccarat")
        rows = journal_rows(self.journal_dir)
        journal_ids = {r[1] for r in rows}
        memory = self.from_memory_alarms()
        memory_ids = {g.msg_id for g in memory}
        raw = [g for g in self.sub.snapshot() if g.msg_id and g.msg_id not in memory_ids]
        firsts = [g for g in self.sub.first_of_each() if g.msg_id not in memory_ids]
        got_ids = {g.msg_id for g in firsts}
        missing = journal_ids - got_ids
        unjournaled = got_ids - journal_ids
        assert not missing, f"{len(missing)} journaled messages never arrived, e.g. {sorted(missing)[:5]}"
        assert not unjournaled, f"published but not journaled: {sorted(unjournaled)[:5]}"
        assert len(rows) == len({r[0] for r in rows}) and [r[0] for r in rows] == sorted(r[0] for r in rows)
        seqs = [g.seq for g in firsts]
        out_of_order = sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
        assert out_of_order == 0, f"seq out of order after de-duplication: {seqs[:50]}"
        assert seqs == [r[0] for r in rows], "the de-duplicated stream is not exactly the journal's seq order"

        results = [g for g in firsts if g.topic.endswith("/results")]
        floor = [g for g in firsts if g.topic.endswith("/floor/rounds")]
        assert len(results) == len(rounds), f"{len(results)} results for {len(rounds)} completed rounds"
        got_settle: dict[tuple[Any, Any], list[tuple[Any, ...]]] = {}
        for g in firsts:
            if g.topic.endswith("/settlements"):
                got_settle.setdefault((g.body["shoe"], g.body["round"]), []).append(
                    settlement_key(g.body, baccarat))
        expected_n = received_n = lost = wrong = 0
        for res, fr, rnd in zip(results, floor, rounds, strict=False):
            key = (res.body["shoe"], res.body["round"])
            assert (fr.body["shoe"], fr.body["round"]) == key
            assert [c["card"] for c in fr.body["cards"]] == [str(c) for _, c in rnd.cards], \
                f"floor record {key} does not hold the dealt cards"
            exp = Counter(expected_settlements(self.sim, rnd))
            got = Counter(got_settle.pop(key, []))
            expected_n += sum(exp.values())
            received_n += sum(got.values())
            lost += sum((exp - got).values())
            wrong += sum((got - exp).values())
        partial_n = 0
        if partial is not None:
            # a baccarat coup cut short before its fourth card has decided no wager (the pair wagers are
            # decided by the first two cards of each hand), so nothing may have been settled for it
            decided = len(partial.cards) >= 4 if baccarat else bool(partial.cards)
            exp_p = Counter()
            if decided:
                try:
                    exp_p = Counter(expected_settlements(self.sim, partial))
                except UsageError:  # cut short before the round's last card: only its two-card wagers
                    exp_p = Counter(expected_two_card_settlements(self.sim, partial))
            for key in list(got_settle):
                got_p = Counter(got_settle.pop(key))
                wrong += sum((got_p - exp_p).values())
                partial_n += sum(got_p.values())
        assert not got_settle, f"settlements for rounds the simulators never completed: {list(got_settle)}"
        assert lost == 0, f"{lost} settlements lost"
        assert wrong == 0, f"{wrong} settlements not what the rules give for the dealt cards"
        assert len(floor) >= len(rounds)

        summary = {
            "scenario": scenario,
            "rounds": len(rounds),
            "settlements_expected": expected_n,
            "settlements_received": received_n,
            "settlements_lost": lost,
            "partial_round_settlements": partial_n,
            "journal_messages": len(rows),
            "from_memory_alarms": len(memory),
            "received_raw": len(raw),
            "received_distinct": len(got_ids),
            "duplicates": len(raw) - len(got_ids),
            "missing_msg_ids": len(missing),
            "seq_out_of_order": out_of_order,
            "daemon_starts": self.daemon.starts,
            "daemon_exits": self.daemon.exits,
            "seconds": round(time.monotonic() - self.started, 1),
            **self.notes,
            **(extra or {}),
        }
        (self.tmp / "results.json").write_text(json.dumps(summary, indent=2))
        print(f"\nFAULTS-RESULT {json.dumps(summary)}")
        return summary


async def make_rig(tmp: Path, *, seed: int, via_proxy: bool = False, fsize: int | None = None,
                   stall_seconds: int | None = None,
                   keepalive: int = 5, ack_timeout: float = 60.0) -> Rig:
    """Start a Mosquitto (persistence in ``tmp/broker``), the proxy if asked, the subscriber, the
    simulated baccarat table and the daemon, and wait until the daemon has opened both devices."""
    broker = MosquittoBroker(tmp / "broker")
    broker.start()
    proxy = None
    host, port = broker.host, broker.port
    if via_proxy:
        proxy = LinkProxy(broker.host, broker.port)
        await proxy.start()
        host, port = proxy.host, proxy.port
    dev = tmp / "dev"
    journal = tmp / "journal"
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host=host, port=port, journal=journal)
    text = text.replace("[mqtt]\n", f"[mqtt]\nkeepalive = {keepalive}\n", 1)
    if stall_seconds is not None:
        text = text.replace("[round]\n", f"[round]\nstall_seconds = {stall_seconds}\n", 1)
    path = tmp / "table.toml"
    path.write_text(text)
    config = parse_config(text)
    sim = SimTable(config, dev, seed=seed, ack_timeout=ack_timeout)
    for runner in (sim.shoe_runner, sim.pads_runner):
        # After a replug the devices resend when the host's first bytes arrive (the status request a
        # DeviceLink sends on opening), not blindly after 2 s: a daemon replaying its journal at start
        # may open the port later than that, and pyserial flushes what was written before it opened.
        runner.resend_fallback = 60.0
    await sim.start()
    sub = Subscriber(broker.host, broker.port, f"tablesense/{config.table}/#", f"faults-sub-{tmp.name}")
    await asyncio.to_thread(sub.start)
    daemon = DaemonProc(path, tmp / "daemon.log", fsize=fsize)
    daemon.start()
    rig = Rig(tmp, broker, config, path, sim, sub, daemon, proxy, journal)
    try:
        await sim.wait_host(30)
    except TimeoutError:
        await close_rig(rig)
        raise AssertionError("daemon never opened the devices:\n" + daemon.tail()) from None
    return rig


async def close_rig(rig: Rig) -> None:
    rig.daemon.cleanup()
    with contextlib.suppress(Exception):
        rig.sub.stop()
    await rig.sim.close()
    if rig.proxy is not None:
        await rig.proxy.close()
    rig.broker.stop()


class Dealer:
    """Deals rounds in the background (``SimTable.play_round``, seeded wagers) until :meth:`stop`, with
    ``gap`` seconds between rounds; :meth:`stop` lets the round in progress finish and re-raises any
    error the dealing met (e.g. the daemon never acknowledging a frame within the table's ack timeout)."""

    def __init__(self, sim: SimTable, gap: float = 0.0, max_rounds: int | None = None) -> None:
        self.sim, self.gap, self.max_rounds = sim, gap, max_rounds
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Dealer:
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while not self._stop.is_set():
            if self.max_rounds is not None and len(self.sim.rounds) >= self.max_rounds:
                return
            await self.sim.play_round()
            if self.gap:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.gap)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    @property
    def failed(self) -> BaseException | None:
        t = self._task
        return t.exception() if t is not None and t.done() and not t.cancelled() else None

    async def wait_rounds(self, n: int, timeout: float) -> None:
        def enough() -> bool:
            if self.failed is not None:
                raise AssertionError(f"dealing failed: {self.failed!r}")
            return len(self.sim.rounds) >= n
        await wait_until(enough, timeout, f"{n} rounds dealt")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
