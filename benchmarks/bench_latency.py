#!/usr/bin/env python3
"""Latency, CPU and throughput of one table on the real path, each beside its floor (not a test).

Simulated shoe and bet pads on pseudo-terminals -> ``tablesense run`` (a subprocess, as in production)
-> a private Mosquitto -> a subscriber on every topic of the table, in a process of its own that stamps
each arrival (CLOCK_MONOTONIC, the clock of this process's loop), as signage or the floor system would
be; the bare floors use the same subscriber process. Signage is on a machine of its own; here the
subscriber shares the two cores with the daemon, the broker and the simulated devices, and during a
settlement burst it waits its turn for a core (``--subscriber-nice -10`` gives it the core first, as on a
machine of its own; the default, 0, shares the cores evenly). The dealer deals at
pace 0: it waits for the daemon's acknowledgement of each step's last frame (the daemon acknowledges a
frame only once it is journaled), so the round rate is what one table sustains journaled; the run ends
when every settlement has reached the subscriber (published).

Measured, each against a floor measured in the same run on the same machine and broker:

* **card -> last settlement it decides** (baccarat: Perfect Pairs and House Money by the fourth card, the
  rest by the round's last card), from the last byte of the card frame written to the shoe's pty to that
  settlement at the subscriber, one figure per deciding card, p50 and p99, against the bare QoS 1
  publish -> receive time of the SAME burst: as many messages of the same sizes as the daemon published
  from that card up to that settlement, handed to the broker at once by one publisher, until the last
  arrives (every burst of the run replayed once);
* **card -> first message** it caused at the subscriber, against one bare QoS 1 round trip (one message
  of 400 bytes, one at a time);
* **daemon CPU per round** (user + system from /proc over the measured rounds), goal 5 ms;
* **rounds per second** at pace 0, journaled and published, goal 200;
* both again in a **pipelined** phase after the latency phase: the devices keep up to 64 unacknowledged
  frames (protocol §3) and the dealer waits for an acknowledgement only where the two links' order
  matters (the bets before the first card, the last card before the chips are cleared), so the daemon
  takes whole bursts in one group commit, as it would from devices that do not wait;
* **``tablesense --help``** wall time (median of 5), goal 0.3 s;
* **one fsync** of a 4 KiB write in the journal's directory (p50), the floor of a commit;
* **the libraries' floor** of the CPU per round and of rounds per second, step by step and pipelined
  (``benchmarks/bench_stack.py``, same broker and journal directory, after the daemon stopped): a process
  that reads the same frames through pyserial-asyncio-fast, commits the same rows in as many SQLite
  transactions, acknowledges, and publishes the same messages at QoS 1 (the daemon's MQTT client),
  doing nothing else. The daemon's CPU per round is shown beside it as well as beside the goal.

Stage breakdown (outside in, same run): card written -> its ``AK`` seen by the shoe (read, decode, state
machine, journal commit with its fsync) -> first message at the subscriber
-> last deciding settlement; the daemon's own mean commit time from its metrics textfile.
Start-up at 200,000 rounds is measured by ``benchmarks/bench_journal.py`` (building that journal takes
minutes); see docs/journal.md.

    .venv/bin/python benchmarks/bench_latency.py [--settlements 2000] [--seed 7] [--journal-dir DIR]
        [--subscriber-nice 0]

About a minute on the 2-core machine. Nothing is asserted: speed goals are benchmarks, not tests.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # journal_support.RealTable: the journal floor's traffic
sys.path.insert(0, str(ROOT / "benchmarks"))

import aiomqtt  # noqa: E402
from bench_stack import stack_floor  # noqa: E402  (the libraries' floor of a round's CPU)

from tablesense.daemon.broker import MosquittoBroker  # noqa: E402
from tablesense.daemon.config import parse_config  # noqa: E402
from tablesense.daemon.journal.key import write_new_key  # noqa: E402
from tablesense.daemon.mqtt import NODELAY  # noqa: E402
from tablesense.simulators.dealer import SimTable, sim_config_toml  # noqa: E402

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))
FOURTH_CARD_BETS = {"perfect_pairs", "house_money"}
V5 = aiomqtt.ProtocolVersion.V5


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU time of ``pid`` (or of its thread ``tid``) so far (seconds, /proc)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def fsync_ms(directory: Path, n: int = 200) -> list[float]:
    """Times (ms) of one 4 KiB write + fsync in ``directory``."""
    path = directory / "fsync-probe"
    out = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for i in range(n):
            t0 = time.perf_counter()
            os.pwrite(fd, os.urandom(4096), (i % 16) * 4096)
            os.fsync(fd)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return out


def card_append_ms(directory: Path, rounds: int = 40) -> list[float]:
    """Times (ms) of journaling one card's input with what it emits (:meth:`Journal.append`, one fsync'd
    transaction), for the cards of ``rounds`` realistic rounds of the bench's table (the tests'
    ``RealTable``: the real machine's messages), in a journal in ``directory``."""
    from journal_support import RealTable

    from tablesense.daemon.journal import Journal
    from tablesense.drivers.events import CardDrawn

    table = RealTable(seed=11)
    out: list[float] = []
    with tempfile.TemporaryDirectory(dir=directory) as d, \
            Journal(Path(d), table.config.table, key=os.urandom(32)) as journal:
        for _ in range(rounds):
            for inp, emits in table.round():
                t0 = time.perf_counter()
                journal.append(inp, emits)
                if isinstance(inp.event, CardDrawn):
                    out.append((time.perf_counter() - t0) * 1000)
    return out


def help_seconds(runs: int = 5) -> float:
    """Median wall time of ``tablesense --help`` (a fresh interpreter each time)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([TABLESENSE, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def metric_mean(path: Path, name: str) -> float | None:
    """Mean of a histogram (``_sum`` / ``_count``) in a Prometheus textfile, ``None`` when absent."""
    if not path.exists():
        return None
    total = count = 0.0
    for line in path.read_text().splitlines():
        if line.startswith(f"{name}_sum"):
            total = float(line.split()[-1])
        elif line.startswith(f"{name}_count"):
            count = float(line.split()[-1])
    return total / count if count else None


class Subscriber:
    """A QoS 1 subscriber to ``topic`` in a process of its own (as signage or the floor system is): it
    stamps each message with CLOCK_MONOTONIC (``time.monotonic``, the clock ``loop.time()`` reads here)
    as it arrives, so the figures do not depend on what this process (the dealer, the devices) is doing
    at that moment. ``on_message(t, payload)`` is called here for each message, in arrival order.

    ``nice``: the process's scheduling niceness (``setpriority``; negative needs root or CAP_SYS_NICE).
    Signage and the floor system run on machines of their own; here the subscriber shares two cores with
    the daemon, the broker and this process's simulated dealer and devices, and when all of them are busy
    it waits its turn for a core (0.3-0.7 ms a message in a settlement burst, measured). A negative
    value gives it the core first, standing in for a machine of its own; ``nice_applied`` says what it
    got (the floors' subscriber gets the same)."""

    def __init__(self, broker: MosquittoBroker, topic: str, on_message: Any, nice: int = 0) -> None:
        self.broker, self.topic, self.on_message, self.nice = broker, topic, on_message, nice
        self.nice_applied = 0

    async def __aenter__(self) -> Subscriber:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--subscribe", self.broker.host, str(self.broker.port), self.topic,
            stdout=asyncio.subprocess.PIPE, limit=1 << 24)
        if self.nice:
            try:
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, self.nice)
                self.nice_applied = self.nice
            except OSError:  # not permitted: it runs at the default
                self.nice_applied = os.getpriority(os.PRIO_PROCESS, self.proc.pid)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError(f"the subscriber process did not start: {line!r}")
        self.task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            t, topic, payload = line.rstrip(b"\n").split(b" ", 2)
            self.on_message(float(t), topic.decode(), payload)

    async def __aexit__(self, *exc: object) -> None:
        self.proc.terminate()
        await self.proc.wait()
        await asyncio.gather(self.task, return_exceptions=True)


async def subscribe_main(host: str, port: int, topic: str) -> None:
    """The subscriber process (:class:`Subscriber`): one line per message, ``<monotonic> <topic> <payload>``
    (payloads are single-line JSON or bench filler)."""
    out = sys.stdout.buffer
    async with aiomqtt.Client(host, port, protocol=V5, socket_options=NODELAY) as c:
        await c.subscribe(topic, qos=1)
        out.write(b"ready\n")
        out.flush()
        async for m in c.messages:
            t = time.monotonic()
            out.write(f"{t:.9f} {m.topic.value} ".encode() + bytes(m.payload) + b"\n")  # type: ignore[arg-type]
            out.flush()


class Bare:
    """Bare QoS 1 traffic through the broker: one publisher, one subscriber (a process of its own, as
    in the daemon's measurement), nothing else."""

    def __init__(self, broker: MosquittoBroker, nice: int = 0) -> None:
        self.broker, self.nice = broker, nice
        self.got: asyncio.Queue[float] = asyncio.Queue()

    async def __aenter__(self) -> Bare:
        self.sub = Subscriber(self.broker, "bench/bare", lambda t, _topic, _p: self.got.put_nowait(t),
                              self.nice)
        await self.sub.__aenter__()
        self.pub = aiomqtt.Client(self.broker.host, self.broker.port, protocol=V5, socket_options=NODELAY)
        self.pub.pending_calls_threshold = 10_000  # a burst is deliberate
        await self.pub.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pub.__aexit__(None, None, None)
        await self.sub.__aexit__(None, None, None)

    async def burst(self, sizes: list[int]) -> float:
        """Hand ``len(sizes)`` messages to the broker at once; ms until the last arrives."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        pubs = [asyncio.create_task(self.pub.publish("bench/bare", b"x" * n, qos=1)) for n in sizes]
        last = 0.0
        for _ in sizes:
            last = await self.got.get()
        await asyncio.gather(*pubs)
        return (last - t0) * 1000


async def main(settlements: int, seed: int, journal_dir: str | None,
               pipeline_rounds: int = 600, subscriber_nice: int = 0) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tablesense-bench-"))
    journal = Path(tempfile.mkdtemp(prefix="tablesense-bench-journal-", dir=journal_dir))
    broker = MosquittoBroker(tmp / "broker", persistence=False, die_with_parent=True)
    broker.start()
    loop = asyncio.get_running_loop()
    dev = tmp / "dev"
    urls = {"shoe": str(dev / "shoe"), "pads": str(dev / "pads")}
    text = sim_config_toml("baccarat", urls=urls, host=broker.host, port=broker.port, journal=journal)
    prom = tmp / "metrics.prom"
    text += f'\n[metrics]\ntextfile = "{prom}"\ninterval = 1\n'
    (tmp / "t.toml").write_text(text)
    write_new_key(tmp / "journal-key")  # the journal's sealing key, as the unit's credential
    config = parse_config(text)
    card_times: dict[int, float] = {}
    ack_times: dict[int, float] = {}
    sim = SimTable(config, dev, seed=seed, pace=0, on_card=lambda seq, t: card_times.__setitem__(seq, t))
    real_wait = sim._wait_acked

    async def wait_acked(runner: Any, seq: int) -> None:
        await real_wait(runner, seq)
        if runner is sim.shoe_runner:
            ack_times.setdefault(seq, loop.time())

    sim._wait_acked = wait_acked  # type: ignore[method-assign]
    await sim.start()
    arrivals: list[tuple[float, bytes]] = []
    n_settled = 0

    def on_message(t: float, topic: str, payload: bytes) -> None:
        nonlocal n_settled
        arrivals.append((t, payload))
        if topic.endswith("/settlements"):
            n_settled += 1

    sub = Subscriber(broker, f"tablesense/{config.table}/#", on_message, subscriber_nice)
    await sub.__aenter__()
    log = open(tmp / "daemon.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([TABLESENSE, "run", "--config", str(tmp / "t.toml"),
                             "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "CREDENTIALS_DIRECTORY": str(tmp)})
    try:
        await sim.wait_host(30)
        bets = {spot: config.wagers[sc.bet].min for spot, sc in config.spots.items()}
        for _ in range(3):  # warm-up: a shoe started, caches filled
            await sim.play_round(bets)
        warm_rounds = len(sim.rounds)
        async with asyncio.timeout(30):
            while n_settled < sum(len(r.wagers) for r in sim.rounds):
                await asyncio.sleep(0.001)
        first_arrival = len(arrivals)
        spy = None
        if os.environ.get("BENCH_PYSPY"):  # profile the daemon over the measured rounds (py-spy, raw)
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p",
                                    str(proc.pid), "-r", "250", "-f", "raw", "--threads", "-o",
                                    os.environ["BENCH_PYSPY"],
                                    *(["--gil"] if os.environ.get("BENCH_PYSPY_GIL") else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1)
        async def deal_until(done: Any) -> None:
            """Rounds until ``done()``; then every settlement dealt at the subscriber (published)."""
            while not done():
                await sim.play_round(bets)
            await sim.flush()
            want = sum(len(r.wagers) for r in sim.rounds)
            async with asyncio.timeout(60):
                while n_settled < want:
                    await asyncio.sleep(0.0005)

        cpu0, loop0, t0 = cpu_seconds(proc.pid), cpu_seconds(proc.pid, proc.pid), time.monotonic()
        warm_settled = sum(len(r.wagers) for r in sim.rounds[:warm_rounds])
        await deal_until(lambda: n_settled - warm_settled >= settlements)
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        loop_cpu = cpu_seconds(proc.pid, proc.pid) - loop0  # the main thread: the event loop
        last_arrival, latency_rounds = len(arrivals), len(sim.rounds)
        # throughput: pipelined devices (a window of unacknowledged frames, protocol §3), the dealer
        # waiting only where the two links' order matters; every settlement published before it ends
        sim.pipeline = True
        cpu1, loop1, t1 = cpu_seconds(proc.pid), cpu_seconds(proc.pid, proc.pid), time.monotonic()
        others = {"bench (dealer, devices)": os.getpid(), "subscriber": sub.proc.pid, "broker": broker.pid}
        others0 = {name: cpu_seconds(pid) for name, pid in others.items() if pid is not None}
        await deal_until(lambda: len(sim.rounds) - latency_rounds >= pipeline_rounds)
        piped_elapsed = time.monotonic() - t1
        piped_cpu = cpu_seconds(proc.pid) - cpu1
        piped_loop_cpu = cpu_seconds(proc.pid, proc.pid) - loop1
        piped_others = {name: (cpu_seconds(pid) - others0[name]) / piped_elapsed  # cores busy
                        for name, pid in others.items() if pid is not None and name in others0}
        rss = rss_kib(proc.pid)
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        await asyncio.sleep(1.2)  # one more metrics textfile
        commit_mean = metric_mean(prom, "tablesense_journal_commit_seconds")
        proc.terminate()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        await sub.__aexit__(None, None, None)
    rounds = latency_rounds - warm_rounds

    # every message of the measured rounds by seq; the cards that decide settlements
    msgs: list[tuple[int, float, int, dict[str, Any]]] = []
    for t, payload in arrivals[first_arrival:last_arrival]:
        body = json.loads(payload)
        if isinstance(body.get("seq"), int) and body["seq"] > 0:
            msgs.append((body["seq"], t, len(payload), body))
    msgs.sort(key=lambda m: m[0])
    by_round: dict[tuple[int, int], int] = {}
    for _s, _t, _n, body in msgs:
        if body.get("schema") == "tablesense.settlement":
            by_round.setdefault((int(body["shoe"]), int(body["round"])), len(by_round))
    measured = sim.rounds[warm_rounds:latency_rounds]
    # the round state showing a card (cards in draw order) is the last message of that card's input
    shown: dict[tuple[int, int, int], tuple[int, float]] = {}  # (shoe, round, cards shown) -> (seq, t)
    for seq, t, _n, body in msgs:
        if body.get("schema") == "tablesense.round" and "round" in body:
            shown.setdefault((int(body["shoe"]), int(body["round"]), len(body.get("cards", ()))), (seq, t))
    last_settle: dict[int, tuple[int, float, int, int, int]] = {}  # card -> its last settlement
    per_settlement: list[float] = []
    for seq, t, _n, body in msgs:
        if body.get("schema") != "tablesense.settlement":
            continue
        shoe, rnd_no = int(body["shoe"]), int(body["round"])
        rnd = measured[by_round[(shoe, rnd_no)]]
        k = 4 if body["bet"] in FOURTH_CARD_BETS else len(rnd.card_seqs)
        card = rnd.card_seqs[k - 1]
        per_settlement.append((t - card_times[card]) * 1000)
        if card not in last_settle or seq > last_settle[card][0]:
            last_settle[card] = (seq, t, shoe, rnd_no, k)
    card_last, card_first, card_ack, bursts = [], [], [], []
    seqs = [m[0] for m in msgs]
    for card, (last_seq, t_last, shoe, rnd_no, k) in last_settle.items():
        t_card = card_times[card]
        # the card's messages follow the round state of the card before it (that input's last message)
        lo = bisect.bisect_right(seqs, shown[(shoe, rnd_no, k - 1)][0])
        hi = bisect.bisect_right(seqs, last_seq)
        t_first = msgs[lo][1]
        bursts.append([m[2] for m in msgs[lo:hi]])
        card_last.append((t_last - t_card) * 1000)
        card_first.append((t_first - t_card) * 1000)
        if card in ack_times:
            card_ack.append((ack_times[card] - t_card) * 1000)

    # floors, same broker, after the daemon stopped (nothing else on it)
    async with Bare(broker, subscriber_nice) as bare:
        single = [await bare.burst([400]) for _ in range(1000)]
        burst_ms = [await bare.burst(sizes) for sizes in bursts]
    # the libraries' floor of a round's CPU and rate, same broker and journal directory (bench_stack.py)
    stack = {mode: stack_floor((broker.host, broker.port), str(journal), 200, mode=mode)
             for mode in ("step", "pipelined")}
    broker.stop()
    await sim.close()
    fsync = fsync_ms(journal)
    appends = card_append_ms(journal)
    helps = help_seconds()
    return {
        "rounds": rounds, "settlements": len(per_settlement), "cards": len(card_last), "elapsed": elapsed,
        "card_last": card_last, "card_first": card_first, "card_ack": card_ack, "bursts": bursts,
        "per_settlement": per_settlement, "bare_single": single, "bare_burst": burst_ms, "fsync": fsync,
        "card_append": appends, "stack": stack,
        "cpu_per_round": cpu / rounds * 1000,
        "loop_cpu_per_round": loop_cpu / rounds * 1000, "rounds_per_s": rounds / elapsed, "help": helps,
        "rss": rss, "commit_mean": commit_mean, "piped_rounds": pipeline_rounds,
        "piped_rounds_per_s": pipeline_rounds / piped_elapsed,
        "piped_cpu_per_round": piped_cpu / pipeline_rounds * 1000,
        "piped_loop_cpu_per_round": piped_loop_cpu / pipeline_rounds * 1000,
        "piped_cores": {"daemon": piped_cpu / piped_elapsed, **piped_others},
        "work": str(tmp), "journal": str(journal), "subscriber_nice": sub.nice_applied,
    }


def report(r: dict[str, Any]) -> str:
    """The one table: figure, measured, floor, ratio to the floor (or the goal)."""
    p50, p99 = statistics.median, (lambda v: pct(v, 99))
    bsizes = [len(b) for b in r["bursts"]]
    step, piped = r["stack"]["step"], r["stack"]["pipelined"]
    kib = statistics.median(sum(b) for b in r["bursts"]) / 1024
    rows = [
        ("card -> last settlement it decides, p50", p50(r["card_last"]), "bare burst p50",
         p50(r["bare_burst"]), "3x"),
        ("card -> last settlement it decides, p99", p99(r["card_last"]), "bare burst p99",
         p99(r["bare_burst"]), "3x"),
        ("card -> first message, p50", p50(r["card_first"]), "bare RTT p50", p50(r["bare_single"]), "3x"),
        ("card -> first message, p99", p99(r["card_first"]), "bare RTT p99", p99(r["bare_single"]), "3x"),
        ("card -> first message, p50", p50(r["card_first"]), "RTT+append p50",
         p50(r["bare_single"]) + p50(r["card_append"]), ""),
        ("card -> AK (journaled), p50", p50(r["card_ack"]) if r["card_ack"] else float("nan"),
         "one fsync p50", p50(r["fsync"]), ""),
        ("daemon CPU per round (ms)", r["cpu_per_round"], "goal", 5.0, "1x"),
        ("daemon CPU per round (ms)", r["cpu_per_round"], "libraries' floor", step["cpu_per_round_ms"], ""),
        ("rounds/s at pace 0", r["rounds_per_s"], "goal", 200.0, "1x"),
        ("rounds/s at pace 0", r["rounds_per_s"], "libraries' floor", step["rounds_per_s"], ""),
        ("daemon CPU per round, pipelined (ms)", r["piped_cpu_per_round"], "goal", 5.0, "1x"),
        ("daemon CPU per round, pipelined (ms)", r["piped_cpu_per_round"], "libraries' floor",
         piped["cpu_per_round_ms"], ""),
        ("rounds/s at pace 0, pipelined", r["piped_rounds_per_s"], "goal", 200.0, "1x"),
        ("rounds/s at pace 0, pipelined", r["piped_rounds_per_s"], "libraries' floor", piped["rounds_per_s"],
         ""),
        ("tablesense --help (ms)", r["help"] * 1000, "goal", 300.0, "1x"),
    ]
    out = [f"{r['rounds']} rounds, {r['settlements']} settlements, {r['cards']} deciding cards in "
           f"{r['elapsed']:.1f} s; bursts of {min(bsizes)}-{max(bsizes)} messages "
           f"(median {statistics.median(bsizes):g}, {kib:.1f} KiB)",
           f"{'figure':44} {'measured':>9}  {'floor':16} {'value':>8}  {'ratio':>6}  {'allowed':>7}",
           "-" * 100]
    for name, value, floor_name, floor, allowed in rows:
        ratio = value / floor if floor else float("nan")
        if name.startswith("rounds/s"):
            ratio = floor / value if value else float("inf")  # a rate: the goal (or floor) over the figure
        out.append(f"{name:44} {value:9.2f}  {floor_name:16} {floor:8.2f}  {ratio:6.2f}  {allowed:>7}")
    out.append("-" * 100)
    out.append("ratio: figure / floor (for rounds/s: goal / figure, floor / figure), 'allowed' the goal as a "
               "ratio; times ms")
    cpu_s, cpu_p = step["cpu_per_round_ms"], piped["cpu_per_round_ms"]
    out.append(f"libraries' floor (benchmarks/bench_stack.py, same broker and directory): a process that "
               f"only reads the round's frames (pyserial-asyncio-fast), commits its "
               f"{step['rows_per_round']:.0f} rows (SQLite, fsync) in {step['groups_per_round']:.0f} "
               f"transactions step by step and {piped['groups_per_round']:.0f} pipelined, writes the "
               f"acknowledgements and publishes its {step['messages_per_round']:.1f} messages at QoS 1 (the "
               f"daemon's MQTT client): {cpu_s:.2f} and {cpu_p:.2f} ms of CPU a round, "
               f"{step['rounds_per_s']:.0f} and {piped['rounds_per_s']:.0f} rounds/s; the CPU goal is "
               f"{5.0 / cpu_s:.2f}x and {5.0 / cpu_p:.2f}x that floor")
    card_ack = r["card_ack"]
    out.append(f"stages (p50, outside in): card -> its AK seen by the shoe "
               f"{p50(card_ack) if card_ack else float('nan'):.2f} ms (read, decode, state machine, commit, "
               f"AK); card -> first message {p50(r['card_first']):.2f} ms; "
               f"first message -> last deciding settlement {p50(r['card_last']) - p50(r['card_first']):.2f}"
               f" ms; one journal append of a card (same directory, no daemon) p50 "
               f"{p50(r['card_append']):.2f} p99 {p99(r['card_append']):.2f} ms"
               f"; the daemon's mean commit (its metrics) {(r['commit_mean'] or float('nan')) * 1000:.2f}"
               f" ms; per settlement p50 {p50(r['per_settlement']):.2f} "
               f"p99 {p99(r['per_settlement']):.2f} ms")
    out.append(f"daemon CPU per round {r['cpu_per_round']:.2f} ms: event loop thread "
               f"{r['loop_cpu_per_round']:.2f} ms (devices, state machine, MQTT), worker threads "
               f"{r['cpu_per_round'] - r['loop_cpu_per_round']:.2f} ms (journal commits, maintenance)")
    out.append(f"pipelined ({r['piped_rounds']} rounds; the devices keep up to 64 unacknowledged frames, the "
               f"dealer waits for the bets' AK before the first card and the last card's before clearing): "
               f"event loop thread {r['piped_loop_cpu_per_round']:.2f} ms, worker threads "
               f"{r['piped_cpu_per_round'] - r['piped_loop_cpu_per_round']:.2f} ms a round; cores busy "
               f"meanwhile (of {os.cpu_count()}): "
               + ", ".join(f"{k} {v:.2f}" for k, v in r["piped_cores"].items()))
    out.append(f"daemon memory at the end {r['rss'][0] / 1024:.1f} MiB (peak {r['rss'][1] / 1024:.1f} MiB); "
               "start-up at 200,000 rounds: benchmarks/bench_journal.py")
    if r["subscriber_nice"]:
        out.append(f"subscribers (the daemon's and the floors') at nice {r['subscriber_nice']}: first to a "
                   "core, standing in for signage on a machine of its own")
    out.append(f"(work files in {r['work']}; journal in {r['journal']})")
    return "\n".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settlements", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pipeline-rounds", type=int, default=600,
                    help="rounds of the pipelined throughput phase (after the latency phase)")
    ap.add_argument("--journal-dir", default=None,
                    help="where the journal goes (default: the temp dir; /dev/shm shows the cost of fsync)")
    ap.add_argument("--subscriber-nice", type=int, default=0,
                    help="niceness of the subscriber processes (default 0: sharing the cores evenly with "
                         "the daemon, the broker and the bench; -10: first to a core, as on a machine of "
                         "their own)")
    ap.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    ap.add_argument("--subscribe", nargs=3, metavar=("HOST", "PORT", "TOPIC"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.subscribe:
        with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
            asyncio.run(subscribe_main(a.subscribe[0], int(a.subscribe[1]), a.subscribe[2]))
        sys.exit(0)
    result = asyncio.run(main(a.settlements, a.seed, a.journal_dir, a.pipeline_rounds, a.subscriber_nice))
    print(report(result))
    if a.json:
        print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}))
