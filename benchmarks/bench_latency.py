#!/usr/bin/env python3
"""Settlement latency and daemon memory on the real path (not a test).

Simulated shoe and bet pads on pseudo-terminals -> ``tablesense run`` (a subprocess, as in production)
-> a private Mosquitto -> a subscriber in this process. For every settlement it measures the time from
the last byte of the card frame that decided it being written to the shoe's pty, to the settlement
arriving at the subscriber (baccarat: pair wagers and House Money are decided by the fourth card, the
rest by the round's last card). Beside it, on the same broker in the same run, the bare MQTT
publish-to-receive time of QoS 1 messages of similar size. Also the daemon's resident memory (VmRSS and
peak VmHWM from /proc).

    .venv/bin/python benchmarks/bench_latency.py [--settlements 2000] [--seed 7]

Goal: p99 under 10 ms; resident memory under 80 MB. The dealer waits for the daemon's
acknowledgement of each frame before the next (pace 0), so this is latency, not throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiomqtt  # noqa: E402

from tablesense.daemon.broker import MosquittoBroker  # noqa: E402
from tablesense.daemon.config import parse_config  # noqa: E402
from tablesense.daemon.journal.key import write_new_key  # noqa: E402
from tablesense.daemon.mqtt import NODELAY  # noqa: E402
from tablesense.simulators.dealer import SimTable, sim_config_toml  # noqa: E402

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
FOURTH_CARD_BETS = {"perfect_pairs", "house_money"}


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


async def bare_mqtt(broker: MosquittoBroker, n: int, size: int) -> list[float]:
    """Publish-to-receive times (ms) of ``n`` QoS 1 messages of ``size`` bytes, one at a time."""
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
    payload = b"x" * size
    async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                              socket_options=NODELAY) as pub:
        for _ in range(n):
            t0 = loop.time()
            await pub.publish("bench/bare", payload, qos=1)
            out.append((await got.get() - t0) * 1000)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return out


async def main(settlements: int, seed: int, pace: float, journal_dir: str | None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tablesense-bench-"))
    journal = Path(tempfile.mkdtemp(prefix="tablesense-bench-journal-", dir=journal_dir))
    broker = MosquittoBroker(tmp / "broker", persistence=False)
    broker.start()
    loop = asyncio.get_running_loop()
    dev = tmp / "dev"
    urls = {"shoe": str(dev / "shoe"), "pads": str(dev / "pads")}
    text = sim_config_toml("baccarat", urls=urls, host=broker.host, port=broker.port, journal=journal)
    (tmp / "t.toml").write_text(text)
    write_new_key(tmp / "journal-key")  # the journal's sealing key, as the unit's credential
    config = parse_config(text)
    card_times: dict[int, float] = {}
    sim = SimTable(config, dev, seed=seed, pace=pace,
                   on_card=lambda seq, t: card_times.__setitem__(seq, t))
    await sim.start()
    arrivals: list[tuple[float, dict[str, object]]] = []
    ready = asyncio.Event()

    async def subscriber() -> None:
        async with aiomqtt.Client(broker.host, broker.port, protocol=aiomqtt.ProtocolVersion.V5,
                              socket_options=NODELAY) as c:
            await c.subscribe(f"tablesense/{config.table}/settlements", qos=1)
            ready.set()
            async for m in c.messages:
                arrivals.append((loop.time(), json.loads(m.payload)))  # type: ignore[arg-type]

    sub = asyncio.create_task(subscriber())
    await ready.wait()
    log = open(tmp / "daemon.log", "wb")  # noqa: SIM115
    import subprocess
    prefix = os.environ.get("BENCH_DAEMON_PREFIX", "").split()
    proc = subprocess.Popen([*prefix, TABLESENSE, "run", "--config", str(tmp / "t.toml"),
                             "--log-level", "warning"],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "CREDENTIALS_DIRECTORY": str(tmp)})
    try:
        await sim.wait_host(30)
        rss_start = rss_kib(proc.pid)
        bets = {spot: config.wagers[sc.bet].min for spot, sc in config.spots.items()}
        t0 = time.monotonic()
        while len(arrivals) < settlements:
            await sim.play_round(bets)
        async with asyncio.timeout(30):
            while len(arrivals) < sum(len(r.wagers) for r in sim.rounds):
                await asyncio.sleep(0.01)
        elapsed = time.monotonic() - t0
        rss_end = rss_kib(proc.pid)
        proc.terminate()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        sub.cancel()
        await asyncio.gather(sub, return_exceptions=True)
    # settlement -> the card frame that decided it
    # rounds are numbered within their shoe: map (shoe, round) to the dealer's rounds in arrival order
    lat: list[float] = []
    by_shoe_round: dict[tuple[int, int], int] = {}
    order: list[tuple[int, int]] = []
    for _t, body in arrivals:
        key = (int(body["shoe"]), int(body["round"]))
        if key not in by_shoe_round:
            by_shoe_round[key] = len(order)
            order.append(key)
    for t_arrive, body in arrivals:
        rnd = sim.rounds[by_shoe_round[(int(body["shoe"]), int(body["round"]))]]
        seq = rnd.card_seqs[3] if body["bet"] in FOURTH_CARD_BETS else rnd.card_seqs[-1]
        lat.append((t_arrive - card_times[seq]) * 1000)
    bare = await bare_mqtt(broker, max(2000, settlements), 400)
    broker.stop()
    print(f"settlement latency (card frame written to pty -> settlement at subscriber), "
          f"{len(lat)} settlements over {len(sim.rounds)} rounds in {elapsed:.1f} s:")
    print(f"  p50 {statistics.median(lat):.2f} ms   p99 {pct(lat, 99):.2f} ms   max {max(lat):.2f} ms")
    print(f"bare MQTT QoS 1 publish -> receive, same broker, {len(bare)} messages of 400 bytes:")
    print(f"  p50 {statistics.median(bare):.2f} ms   p99 {pct(bare, 99):.2f} ms   max {max(bare):.2f} ms")
    print(f"daemon resident memory: {rss_start[0] / 1024:.1f} MiB after start, "
          f"{rss_end[0] / 1024:.1f} MiB at the end, peak {rss_end[1] / 1024:.1f} MiB")
    print(f"(work files in {tmp}; journal in {journal}, synchronous=FULL: one fsync per input)")
    await sim.close()
    os.sync()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settlements", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pace", type=float, default=0.05, help="seconds between cards (default 0.05)")
    ap.add_argument("--journal-dir", default=None,
                    help="where the journal goes (default: the temp dir; /dev/shm shows the cost of fsync)")
    a = ap.parse_args()
    asyncio.run(main(a.settlements, a.seed, a.pace, a.journal_dir))
