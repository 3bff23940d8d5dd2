#!/usr/bin/env python3
"""A whole floor on one broker: N real tables into one floor service on PostgreSQL (not a test).

N simulated baccarat tables (shoe and bet pads on pseudo-terminals, in this process) each feed a real
``tablesense run`` (a subprocess, as in production) at a realistic pace (``--pace`` seconds per card,
``--gap`` seconds between rounds); every daemon publishes to one private Mosquitto; one ``tablesense
floor`` (a subprocess) stores everything in a throwaway PostgreSQL database. For ``--seconds`` of dealing
it measures:

* settlements/s committed at the floor;
* card-to-database latency: from the last byte of a round's last card frame written to the shoe's pty,
  to the floor's commit of that round's floor record (PostgreSQL ``NOTIFY`` from the floor's own
  transaction, received here), p50/p99; beside it, measured in the same run, its floors: a bare MQTT QoS 1
  publish-to-receive and one PostgreSQL single-row commit (``synchronous_commit`` as configured);
* the broker's CPU (utime+stime of the mosquitto process over the run) and each daemon's resident memory;
* the proof, per table: the floor's ``messages`` hold exactly the journal's outbox rows (same ``msg_id``
  set, same payload bytes), seq 1..last complete and in order, no duplicate, settlements equal.

    .venv/bin/python benchmarks/bench_floor.py --tables 10 [--seconds 120] [--pace 0.5] [--gap 4]

Prints one ``BENCH-FLOOR`` JSON line and a short table; exit status 1 if the proof fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiomqtt  # noqa: E402
import psycopg  # noqa: E402

from tablesense.daemon.broker import MosquittoBroker  # noqa: E402
from tablesense.daemon.config import parse_config  # noqa: E402
from tablesense.daemon.floor.consumer import NOTIFY_CHANNEL  # noqa: E402
from tablesense.daemon.journal import sealed_snapshot, write_new_key  # noqa: E402
from tablesense.daemon.mqtt import NODELAY  # noqa: E402
from tablesense.simulators.dealer import SimTable, sim_config_toml  # noqa: E402

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
PG_ADMIN = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))] if s else float("nan")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bare_mqtt(broker: MosquittoBroker, n: int = 300) -> list[float]:
    """Publish-to-receive (ms) of QoS 1 messages of a settlement's size, one at a time."""
    loop = asyncio.get_running_loop()
    got: asyncio.Queue[float] = asyncio.Queue()
    ready = asyncio.Event()

    async def sub() -> None:
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                                  socket_options=NODELAY) as c:
            await c.subscribe("bench/bare", qos=1)
            ready.set()
            async for _m in c.messages:
                got.put_nowait(loop.time())

    task = asyncio.create_task(sub())
    await ready.wait()
    out = []
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                              socket_options=NODELAY) as pub:
        for _ in range(n):
            t0 = loop.time()
            await pub.publish("bench/bare", b"x" * 400, qos=1)
            out.append((await got.get() - t0) * 1000)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


async def pg_commit(url: str, n: int = 300) -> list[float]:
    """One single-row INSERT + COMMIT (ms), n times."""
    out = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE TEMP TABLE bench_fsync (i INTEGER)")
        for i in range(n):
            t0 = time.perf_counter()
            async with conn.transaction():
                await conn.execute("INSERT INTO bench_fsync VALUES (%s)", (i,))
            out.append((time.perf_counter() - t0) * 1000)
    return out


def journal_rows(directory: Path, key: bytes) -> list[tuple[int, str, bytes]]:
    """``(seq, msg_id, payload)`` of every message the table's sealed journal holds, verified."""
    return [(r.seq, r.msg_id, bytes(r.payload)) for r in sealed_snapshot(directory, key).messages()]


class Table:
    """One simulated table and its daemon."""

    def __init__(self, tmp: Path, i: int, broker: MosquittoBroker, pace: float, gap: float) -> None:
        self.name = f"bench-{i:03d}"
        self.dir = tmp / self.name
        self.dir.mkdir()
        dev = self.dir / "dev"
        text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                               host=broker.host, port=broker.port, journal=self.dir / "journal",
                               table=self.name)
        (self.dir / "t.toml").write_text(text)
        self.key = write_new_key(self.dir / "journal-key")  # the journal's sealing key, as a credential
        self.config = parse_config(text)
        self.last_card = 0.0
        self.round_ends: list[float] = []
        self.sim = SimTable(self.config, dev, seed=1000 + i, pace=pace, on_card=self._card)
        self.gap = gap
        self.proc: subprocess.Popen[bytes] | None = None

    def _card(self, _seq: int, t: float) -> None:
        self.last_card = t

    async def start(self) -> None:
        await self.sim.start()
        self.proc = subprocess.Popen([TABLESENSE, "run", "--config", str(self.dir / "t.toml"), "--log-level",
                                      "warning"], stdout=(self.dir / "daemon.log").open("wb"),
                                     stderr=subprocess.STDOUT,
                                     env={**os.environ, "CREDENTIALS_DIRECTORY": str(self.dir)})
        await self.sim.wait_host(120)

    async def deal(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self.gap * (hash(self.name) % 100) / 100)  # tables out of step
        while loop.time() < until:
            await self.sim.play_round()
            self.round_ends.append(self.last_card)
            await asyncio.sleep(self.gap)


async def main(n: int, seconds: float, pace: float, gap: float) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="tablesense-bench-floor-"))
    db_name = f"bench_floor_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as c:
        await c.execute(f'CREATE DATABASE "{db_name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + "/" + db_name
    broker = MosquittoBroker(tmp / "broker", extra="max_connections -1", die_with_parent=True)
    broker.start()
    loop = asyncio.get_running_loop()
    floor = subprocess.Popen([TABLESENSE, "floor", "--broker", broker.url, "--database", url, "--client-id",
                              "floor-bench"], stdout=(tmp / "floor.log").open("wb"), stderr=subprocess.STDOUT)
    commits: list[tuple[float, str, str, int, int]] = []
    listen_ready = asyncio.Event()

    async def listen() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            listen_ready.set()
            async for note in conn.notifies():
                t = loop.time()
                for table, ranges in json.loads(note.payload)["tables"].items():
                    for epoch, lo, hi in ranges:
                        commits.append((t, table, epoch, int(lo), int(hi)))

    listener = asyncio.create_task(listen())
    tables = [Table(tmp, i, broker, pace, gap) for i in range(n)]
    result: dict[str, Any] = {"tables": n, "seconds": seconds, "pace_s_per_card": pace, "gap_s": gap,
                              "load_before": os.getloadavg()}
    try:
        await asyncio.wait_for(listen_ready.wait(), 30)
        while b"floor_subscribed" not in (tmp / "floor.log").read_bytes():  # its session exists from now on
            if floor.poll() is not None:
                raise SystemExit("tablesense floor ended: " + (tmp / "floor.log").read_text()[-2000:])
            await asyncio.sleep(0.1)
        for chunk in range(0, n, 10):  # start in tens: each daemon replays its (empty) journal at start
            await asyncio.gather(*(t.start() for t in tables[chunk:chunk + 10]))
        bare = await bare_mqtt(broker)
        fsync = await pg_commit(url)
        cpu0, t0 = cpu_seconds(broker.pid or 0), loop.time()
        until = loop.time() + seconds
        await asyncio.gather(*(t.deal(until) for t in tables))
        dealt_s = loop.time() - t0
        result["load_during"] = os.getloadavg()
        # let the floor catch up with every journal
        deadline = loop.time() + 120
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            while loop.time() < deadline:
                want = sum(len(journal_rows(t.dir / "journal", t.key)) for t in tables)
                have = (await (await conn.execute("SELECT COUNT(*) FROM messages")).fetchone() or [0])[0]
                if have >= want:
                    break
                await asyncio.sleep(0.5)
        caught_up_s = loop.time() - t0 - dealt_s
        cpu1 = cpu_seconds(broker.pid or 0)
        rss = [rss_kib(t.proc.pid) / 1024 for t in tables if t.proc is not None and t.proc.poll() is None]
        # the proof and the latencies
        lost = dup = out_of_order = wrong_payload = 0
        latencies: list[float] = []
        settlements = 0
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            for t in tables:
                rows = journal_rows(t.dir / "journal", t.key)
                cur = await conn.execute("SELECT seq, msg_id, payload FROM messages WHERE table_id = %s "
                                         "ORDER BY seq", (t.name,))
                stored = await cur.fetchall()
                jids = {m for _, m, _ in rows}
                sids = [m for _, m, _ in stored]
                lost += len(jids - set(sids))
                dup += len(sids) - len(set(sids))
                seqs = [int(s) for s, _, _ in stored]
                out_of_order += 0 if seqs == list(range(1, len(seqs) + 1)) else 1
                jp = {m: p for _, m, p in rows}
                wrong_payload += sum(1 for _, m, p in stored if jp.get(m) != p.encode())
                cur = await conn.execute("SELECT COUNT(*) FROM settlements WHERE table_id = %s", (t.name,))
                settlements += int((await cur.fetchone() or [0])[0])
                # round k's floor record (k-th in seq order) <-> the k-th round the dealer completed
                cur = await conn.execute("SELECT seq, epoch FROM rounds WHERE table_id = %s ORDER BY seq",
                                         (t.name,))
                for (seq, epoch), card_t in zip(await cur.fetchall(), t.round_ends, strict=False):
                    when = [c[0] for c in commits if c[1] == t.name and c[2] == epoch and c[3] <= seq <= c[4]]
                    if when:
                        latencies.append((min(when) - card_t) * 1000)
        rounds = sum(len(t.round_ends) for t in tables)
        result.update({
            "rounds": rounds, "settlements": settlements,
            "settlements_per_s": round(settlements / dealt_s, 2),
            "card_to_db_ms": {"p50": round(pct(latencies, 50), 1), "p99": round(pct(latencies, 99), 1),
                              "n": len(latencies)},
            "bare_mqtt_ms": {"p50": round(pct(bare, 50), 2), "p99": round(pct(bare, 99), 2)},
            "pg_commit_ms": {"p50": round(pct(fsync, 50), 2), "p99": round(pct(fsync, 99), 2)},
            "latency_p50_over_floors": round(pct(latencies, 50) / (pct(bare, 50) + pct(fsync, 50)), 1),
            "broker_cpu_pct": round((cpu1 - cpu0) / (dealt_s + caught_up_s) * 100, 1),
            "daemon_rss_mib": {"mean": round(sum(rss) / max(1, len(rss)), 1),
                               "max": round(max(rss or [0]), 1)},
            "caught_up_after_s": round(caught_up_s, 1),
            "proof": {"lost": lost, "duplicated": dup, "tables_seq_not_complete_in_order": out_of_order,
                      "payload_differs": wrong_payload,
                      "journal_rows": sum(len(journal_rows(t.dir / "journal", t.key)) for t in tables)},
        })
    finally:
        for t in tables:
            if t.proc is not None and t.proc.poll() is None:
                t.proc.terminate()
        for t in tables:
            if t.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    t.proc.wait(15)
            await t.sim.close()
        floor.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            floor.wait(15)
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        broker.stop()
        async with await psycopg.AsyncConnection.connect(PG_ADMIN, autocommit=True) as c:
            await c.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    print("BENCH-FLOOR " + json.dumps(result))
    p = result.get("proof", {})
    ok = not any(p.get(k) for k in ("lost", "duplicated", "tables_seq_not_complete_in_order",
                                    "payload_differs"))
    print(f"tables {n}: {result.get('settlements_per_s')} settlements/s, card->db p50 "
          f"{result['card_to_db_ms']['p50']} ms p99 {result['card_to_db_ms']['p99']} ms "
          f"(bare MQTT p50 {result['bare_mqtt_ms']['p50']} ms + PG commit p50 "
          f"{result['pg_commit_ms']['p50']} ms; "
          f"x{result['latency_p50_over_floors']}), broker CPU {result['broker_cpu_pct']} %, daemon RSS mean "
          f"{result['daemon_rss_mib']['mean']} MiB, proof {'OK' if ok else 'FAILED'}: {p}")
    return 0 if ok else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--pace", type=float, default=0.5, help="seconds per card (default 0.5)")
    ap.add_argument("--gap", type=float, default=4.0, help="seconds between rounds (default 4)")
    a = ap.parse_args()
    sys.exit(asyncio.run(main(a.tables, a.seconds, a.pace, a.gap)))
