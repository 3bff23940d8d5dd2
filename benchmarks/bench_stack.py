#!/usr/bin/env python3
"""The libraries' floor of a round's CPU: the I/O a round needs, done by the libraries alone (not a test).

What does one round cost a process that does only what the daemon cannot leave out, through the same
libraries, and nothing of its own? For each input group of a round (the groups of pace 0, step by step:
the chips of a step together, each card alone; ``bench_app.grouped``), the measured process:

* reads the group's device frames (their real bytes: the simulators' frames through the protocol codec)
  from a pseudo-terminal through pyserial-asyncio-fast (two links, the shoe and the bet pads, as the
  daemon has), counting bytes only;
* writes one row per input and one per message, of the journal's sizes (the input's JSON and the
  message's JSON, plus :data:`ROW_HEADER` bytes), and a pending entry per message (the messages
  acknowledged since the previous commit deleted in the same transaction), in ONE SQLite transaction in
  WAL mode with ``synchronous=FULL`` (one fsync), in the journal's directory;
* writes the acknowledgement frame back to the device;
* publishes the group's messages (their JSON) at QoS 1 over MQTT v5 to the broker, with TCP_NODELAY,
  through the daemon's own MQTT client (``daemon.mqtt._AckClient``: aiomqtt's ``Client`` with the
  relay's joined writes, read-ahead and PUBACK fast path), each message handed to its paho client, the
  burst written at once with paho's ``loop_write``, one future completed by the burst's last PUBACK.
  aiomqtt's own ``publish``, one awaited call a message, costs about 55 us a message more.

Not done: decoding, the resend and order rules, the state machine and the rules, the hash chain and the
seals, block accounting, maintenance and retention, metrics, logging. Those are the daemon's own work;
what it spends beyond this floor is what they cost. The frames are written by this script's parent
process (a dealer that waits for each group's acknowledgement, as at pace 0), whose CPU is not counted.

The figure: CPU (user + system, ``time.process_time``) of the measured process per round over the
measured rounds, after a few warm-up rounds. ``bench_latency.py`` runs it against its own broker and
journal directory after the daemon stopped, and prints it beside the daemon's CPU per round.

    .venv/bin/python benchmarks/bench_stack.py [--broker HOST:PORT] [--journal-dir DIR] [--rounds 200]

Without ``--broker`` it starts a private Mosquitto as ``bench_latency.py`` does (``set_tcp_nodelay true``;
a broker without it makes the floor wait for delayed ACKs, ten times slower). A broker given must accept
anonymous clients.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import pickle
import select
import sqlite3
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # journal_support.RealTable: realistic rounds
sys.path.insert(0, str(ROOT / "benchmarks"))

WARM = 3
ROW_HEADER = 90
"""Bytes added to each row for what a journal row carries beside the input's or message's JSON (entry or
seq, time, kind, msg_id, channel, chain hint: 60-100 bytes)."""

Group = tuple[dict[str, tuple[bytes, bytes]], list[bytes], list[bytes]]
"""``({link: (frames, ack)}, journal rows, message payloads)`` of one input group (one commit)."""


def pipelined(steps: list[Any]) -> list[list[Any]]:
    """``steps`` in the groups of the pipelined phase of ``bench_latency.py``: the devices do not wait for
    each frame's acknowledgement, the dealer waits only where the two links' order matters (the bets
    before the first card, the last card before the chips are cleared): three groups a round."""
    from tablesense.drivers.events import CardDrawn

    cards = [i for i, (inp, _) in enumerate(steps) if isinstance(inp.event, CardDrawn)]
    if not cards:
        return [steps]
    cut = [0, cards[0], cards[-1] + 1, len(steps)]
    return [steps[a:b] for a, b in itertools.pairwise(cut) if b > a]


def rounds_of(n: int, seed: int = 11, mode: str = "step") -> list[list[Group]]:
    """``n`` realistic 17-spot baccarat rounds as groups (``Group``), from the tests' ``RealTable``;
    ``mode``: ``step`` (the groups of pace 0 step by step) or ``pipelined`` (:func:`pipelined`)."""
    import msgspec
    from bench_app import grouped
    from journal_support import RealTable

    from tablesense.daemon.journal.codec import encode_event
    from tablesense.daemon.table.inputs import TableStart
    from tablesense.drivers.protocols.tsref import encode, encode_ack

    table = RealTable(seed=seed)
    out: list[list[Group]] = []
    for _ in range(n):
        steps = [s for s in table.round() if not isinstance(s[0].event, TableStart)]
        groups: list[Group] = []
        for group in (grouped(steps) if mode == "step" else pipelined(steps)):
            links: dict[str, tuple[bytes, bytes]] = {}
            for inp, _ in group:  # each link's frames, acknowledged by the number of its last
                device = str(inp.event.device)
                links[device] = (links.get(device, (b"", b""))[0] + encode(inp.event),
                                 encode_ack(inp.event.seq))
            rows = [encode_event(inp.event)[1] for inp, _ in group]
            payloads = [msgspec.json.encode(e.message) for _, emits in group for e in emits]
            groups.append((links, rows + payloads, payloads))
        out.append(groups)
    return out


async def measured(spec: dict[str, Any]) -> dict[str, float]:
    """The measured process: read, commit, acknowledge, publish each group of ``spec['rounds']``."""
    import aiomqtt
    import serial_asyncio_fast

    from tablesense.daemon.mqtt import NODELAY, _AckClient

    loop = asyncio.get_running_loop()

    class Counter(asyncio.Protocol):
        def __init__(self) -> None:
            self.got = 0
            self.want = 0
            self.done: asyncio.Future[None] | None = None

        def data_received(self, data: bytes) -> None:
            self.got += len(data)
            if self.done is not None and self.got >= self.want and not self.done.done():
                self.done.set_result(None)

        async def until(self, total: int) -> None:
            self.want = total
            if self.got < total:
                self.done = loop.create_future()
                await self.done

    links: dict[str, tuple[asyncio.BaseTransport, Counter]] = {}
    for name, path in spec["ptys"].items():
        proto = Counter()
        transport, _ = await serial_asyncio_fast.create_serial_connection(loop, lambda p=proto: p, path)
        links[name] = (transport, proto)
    conn = sqlite3.connect(Path(spec["journal_dir"]) / "stack-floor.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, blob BLOB NOT NULL)")
    conn.execute("CREATE TABLE IF NOT EXISTS pending (id INTEGER PRIMARY KEY)")
    header = bytes(ROW_HEADER)
    acked_ids: list[tuple[int]] = []  # the messages acknowledged since the last commit
    seq = 0  # the messages' numbers (the outbox's seq)
    host, port = spec["broker"]
    topic = spec["topic"]
    with open(spec["rounds"], "rb") as f:
        rounds: list[list[Group]] = pickle.load(f)
    wanted = {name: 0 for name in links}
    async with _AckClient(host, port, protocol=aiomqtt.ProtocolVersion.V5, socket_options=NODELAY,
                          max_inflight_messages=64) as client:
        paho_client = client._client  # paho underneath, as the daemon's relay uses it
        waiting: set[int] = set()
        acked: asyncio.Future[None] = loop.create_future()

        def on_publish(_c: Any, _u: Any, mid: int, _reason: Any, _props: Any) -> None:
            waiting.discard(mid)
            if not waiting and not acked.done():
                acked.set_result(None)

        paho_client.on_publish = on_publish
        print("ready", flush=True)
        cpu = start = 0.0
        for n, rnd in enumerate(rounds):
            if n == WARM:
                cpu, start = time.process_time(), time.monotonic()
            for g, (frames, rows, payloads) in enumerate(rnd):
                for link, (chunk, _ack) in frames.items():
                    wanted[link] += len(chunk)
                    await links[link][1].until(wanted[link])
                conn.execute("BEGIN")
                conn.executemany("INSERT INTO rows (blob) VALUES (?)", [(header + r,) for r in rows])
                ids = [(seq + i,) for i in range(1, len(payloads) + 1)]
                seq += len(payloads)
                conn.executemany("INSERT INTO pending (id) VALUES (?)", ids)
                conn.executemany("DELETE FROM pending WHERE id = ?", acked_ids)
                conn.execute("COMMIT")
                acked_ids = ids  # acknowledged below, deleted with the next commit
                for link, (_data, ack) in frames.items():
                    links[link][0].write(ack)  # type: ignore[attr-defined]
                if payloads:  # paho's publish, written at once, one future for the burst's PUBACKs
                    waiting.clear()
                    acked = loop.create_future()
                    for p in payloads:
                        waiting.add(paho_client.publish(f"{topic}/{n}/{g}", p, qos=1).mid)
                    paho_client.loop_write()
                    await acked
        cpu, wall = time.process_time() - cpu, time.monotonic() - start
    for transport, _ in links.values():
        transport.close()
    conn.close()
    measured_rounds = len(rounds) - WARM
    return {"cpu_per_round_ms": cpu / measured_rounds * 1000, "rounds_per_s": measured_rounds / wall,
            "rounds": measured_rounds}


def stack_floor(broker: tuple[str, int], journal_dir: str, rounds: int = 200, seed: int = 11,
                mode: str = "step") -> dict[str, Any]:
    """Run the floor: this process deals the frames, a child process (``--child``) is measured.
    ``mode``: ``step`` or ``pipelined`` (:func:`rounds_of`). Returns the child's figures
    (``cpu_per_round_ms``, ``rounds_per_s``, ``rounds``) and the round's shape (``groups_per_round``,
    ``rows_per_round``, ``messages_per_round``). Nothing subscribes to its messages (a subscriber on
    these two cores would take CPU from it: the floor is the lower for it)."""
    topic = f"bench-stack/{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="tablesense-bench-stack-"))
    data = rounds_of(rounds + WARM, seed, mode)
    (work / "rounds.pickle").write_bytes(pickle.dumps(data))
    masters: dict[str, int] = {}
    slaves: list[int] = []
    ptys: dict[str, str] = {}
    for name in ("shoe", "pads"):
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo before the child's pyserial sets the same
        masters[name] = master
        slaves.append(slave)  # kept open: no hang-up (EIO) while the child opens it
        ptys[name] = os.ttyname(slave)  # the child opens it by name, as the daemon opens a device
    spec = {"ptys": ptys, "journal_dir": journal_dir, "broker": list(broker),
            "rounds": str(work / "rounds.pickle"), "topic": topic}
    (work / "spec.json").write_text(json.dumps(spec))
    child = subprocess.Popen([sys.executable, __file__, "--child", str(work / "spec.json")],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        if child.stdout.readline() != b"ready\n":
            raise SystemExit("the measured process did not start")
        for rnd in data:  # the dealer: a group's frames, then wait for its acknowledgement
            for frames, _rows, _payloads in rnd:
                for link, (chunk, _ack) in frames.items():
                    os.write(masters[link], chunk)
                for link, (_data, ack) in frames.items():
                    got = b""
                    while len(got) < len(ack):
                        if not select.select([masters[link]], [], [], 1.0)[0]:
                            if child.poll() is not None:
                                raise SystemExit("the measured process ended early (its error above)")
                            continue
                        got += os.read(masters[link], 4096)
        out, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
        for fd in [*masters.values(), *slaves]:
            os.close(fd)
    result: dict[str, Any] = json.loads(out)
    measured_rounds = data[WARM:]
    result["groups_per_round"] = sum(len(r) for r in measured_rounds) / len(measured_rounds)
    result["rows_per_round"] = sum(len(g[1]) for r in measured_rounds for g in r) / len(measured_rounds)
    result["messages_per_round"] = sum(len(g[2]) for r in measured_rounds for g in r) / len(measured_rounds)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default=None,
                    help="HOST:PORT of an MQTT broker taking anonymous clients (default: a private one)")
    ap.add_argument("--journal-dir", default=None, help="where the SQLite file goes (default: the temp dir)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(measured(json.loads(Path(a.child).read_text())))))
        return 0
    journal_dir = a.journal_dir or tempfile.mkdtemp(prefix="tablesense-bench-stack-journal-")
    private = None
    if a.broker:
        host, _, port_text = a.broker.rpartition(":")
        broker = (host, int(port_text))
    else:
        from tablesense.daemon.broker import MosquittoBroker

        private = MosquittoBroker(Path(tempfile.mkdtemp(prefix="tablesense-bench-stack-")) / "broker",
                                  persistence=False, die_with_parent=True)
        private.start()
        broker = (private.host, private.port)
    try:
        results = {mode: stack_floor(broker, journal_dir, a.rounds, mode=mode)
                   for mode in ("step", "pipelined")}
    finally:
        if private is not None:
            private.stop()
    for mode, r in results.items():
        print(f"libraries' floor, {mode}: {r['cpu_per_round_ms']:.2f} ms of CPU a round "
              f"({r['rounds']} rounds; {r['groups_per_round']:.1f} commits, {r['rows_per_round']:.1f} "
              f"rows and {r['messages_per_round']:.1f} QoS 1 publishes a round), "
              f"{r['rounds_per_s']:.1f} rounds/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
