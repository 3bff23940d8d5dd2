#!/usr/bin/env python3
"""Benchmark: the sealed journal (not a test, nothing asserted).

Run: ``.venv/bin/python benchmarks/bench_journal.py [--dir DIR] [--rounds 400] [--startup-rounds 200000]
[--keep DIR]``. ``--dir`` should be on the disk the journal will live on (default: the system temp dir;
``/dev/shm`` would measure memory, not an fsync). Every figure is printed beside its floor measured in
the same run, as a ratio:

* **floor**: one ``fsync`` of a 4 KiB write in the same directory (p50, p99), and the time-to-ready of
  ``tablesense run`` with an empty journal;
* **append**: the daemon's real inputs and messages of a 17-spot baccarat table (the deploy/examples
  config, the real state machine, the simulators' frames through the real codec), each input one sealed,
  fsynced transaction: latency p50 / p99 against one fsync; CPU per round (sealing, encoding, SQLite);
* **bytes per round** on disk once archived, without and with device heartbeats (every 2 s, 45 s
  rounds), against the 5 KB goal and against the raw payloads journaled;
* **maintenance** (archive, retention, vacuum, in a worker thread as the app runs it): CPU per round,
  and the append latency while it runs against without (it must never delay a settlement);
* **start-up**: ``tablesense run`` from process start to ``READY=1`` (systemd notify socket) with a
  journal of ``--startup-rounds`` rounds (built once with ``append_many``, kept with ``--keep``; the
  history scripted one-spot rounds, the last two shoes the 17-spot table's real rounds): the daemon checks
  the sealed state and the blocks from the replay's start only, then replays those two shoes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from journal_support import RealTable  # noqa: E402  (the tests' realistic table traffic)

from tablesense.daemon.journal import Journal  # noqa: E402
from tablesense.daemon.journal.key import write_new_key  # noqa: E402
from tablesense.daemon.table.inputs import Emit, TimedInput  # noqa: E402

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fsync_floor(directory: Path, n: int = 1000) -> list[float]:
    """Seconds per 4 KiB write + fsync in ``directory``."""
    path = directory / "fsync-floor"
    out = []
    with open(path, "wb") as f:
        for _ in range(n):
            a = time.perf_counter()
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
            out.append(time.perf_counter() - a)
    path.unlink()
    return out


def used_bytes(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
    finally:
        conn.close()
    return int((pages - free) * size)


def appends(directory: Path, key: bytes, rounds: int, heartbeat: float, concurrent_prune: bool
            ) -> dict[str, Any]:
    """Journal ``rounds`` realistic rounds input by input (fsync each); acknowledge every message as the
    relay would; maintenance every 10 rounds (in a thread beside the appends with ``concurrent_prune``)."""
    table = RealTable(seed=11, heartbeat_every=heartbeat)
    steps = [table.round() for _ in range(rounds)]
    raw = sum(len(str(i.event)) for rs in steps for i, _ in rs)
    lat: list[float] = []
    prune_cpu = 0.0
    prunes = 0
    busy = threading.Event()
    stop = threading.Event()
    with Journal(directory, "bac-01", key=key, retention_rounds=1_000_000) as j:
        holds = HoldTimer(j)

        def maintain() -> None:
            nonlocal prune_cpu, prunes
            while not stop.is_set():
                if busy.wait(0.05):
                    a = time.thread_time()
                    j.prune()
                    prune_cpu += time.thread_time() - a
                    prunes += 1
                    busy.clear()

        worker = threading.Thread(target=maintain, daemon=True)
        if concurrent_prune:
            worker.start()
        payload = 0
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        for n, rs in enumerate(steps):
            for inp, emits in rs:
                a = time.perf_counter()
                rows = j.append(inp, emits)
                lat.append(time.perf_counter() - a)
                payload += sum(len(r.payload) for r in rows)
                for row in rows:
                    j.mark_delivered(row.row_id)
            if n % 10 == 9:
                if concurrent_prune:
                    busy.set()
                else:
                    a = time.process_time()
                    j.prune()
                    prune_cpu += time.process_time() - a
                    prunes += 1

        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        stop.set()
        if concurrent_prune:
            worker.join()
        j.prune()
        used = used_bytes(j.path)
    inputs = sum(len(rs) for rs in steps)
    return {"lat": lat, "cpu_round": (cpu - (0 if concurrent_prune else prune_cpu)) / rounds,
            "prune_cpu_round": prune_cpu / rounds, "bytes_round": used / rounds,
            "payload_round": (payload + raw) / rounds, "inputs_round": inputs / rounds, "wall": wall,
            "prunes": prunes, "holds": holds.maintenance}


class HoldTimer:
    """Wraps the journal's lock to time how long each hold by a thread other than the creating one (the
    maintenance worker) lasts: the longest is the longest an append can wait for maintenance."""

    def __init__(self, journal: Journal) -> None:
        self._inner = journal._lock
        self._owner = threading.get_ident()
        self._since: dict[int, list[float]] = {}
        self.maintenance: list[float] = []
        journal._lock = self  # type: ignore[assignment]

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._inner.acquire(blocking, timeout)
        if got:
            self._since.setdefault(threading.get_ident(), []).append(time.perf_counter())
        return got

    def release(self) -> None:
        start = self._since[threading.get_ident()].pop()
        if threading.get_ident() != self._owner and not self._since[threading.get_ident()]:
            self.maintenance.append(time.perf_counter() - start)
        self._inner.release()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


def build_startup_journal(directory: Path, key: bytes, rounds: int, real_shoes: int = 2) -> tuple[int, int]:
    """A journal of ``rounds`` rounds, every row sealed by the real :meth:`Journal.append_many`, delivered
    and archived as the daemon does: scripted one-spot rounds (80 a shoe) for the history, then
    ``real_shoes`` shoes of the 17-spot table's real inputs and messages -- what start-up replays and
    verifies. The history only has to exist: start-up never reads it (docs/journal.md "Start-up").
    Returns (rounds, inputs)."""
    from journal_support import Traffic

    real = RealTable(seed=5)
    tail: list[tuple[TimedInput, list[Emit]]] = []
    tail_rounds = shoes = 0
    while shoes < real_shoes:  # whole shoes: the last one ends when fewer than 12 cards are left
        tail += real.round()
        tail_rounds += 1
        shoes += real.shoe.remaining < 12
    history = max(0, rounds - tail_rounds)
    traffic = Traffic(table="bac-01")
    inputs = 0
    with Journal(directory, "bac-01", key=key, retention_rounds=1_000_000, max_size=None) as j:

        def commit(batch: list[tuple[TimedInput, list[Emit]]]) -> None:
            for rows in j.append_many(batch):
                for row in rows:
                    j.mark_delivered(row.row_id)

        batch: list[tuple[TimedInput, list[Emit]]] = []
        for n in range(history):
            if n % 80 == 0:
                batch += traffic.new_shoe()
            batch += traffic.baccarat_round()
            if len(batch) >= 600:
                inputs += len(batch)
                commit(batch)
                batch = []
            if n % 2000 == 1999:
                j.prune()
            if n % 20000 == 19999:
                print(f"  ... {n + 1:,} rounds", file=sys.stderr, flush=True)
        for step in tail:
            batch.append(step)
            if len(batch) >= 600:
                inputs += len(batch)
                commit(batch)
                batch = []
        inputs += len(batch)
        commit(batch)
        j.prune()
    return history + tail_rounds, inputs


def time_to_ready(journal: Path, key_file: Path, runs: int = 3) -> list[float]:
    """Seconds from starting ``tablesense run`` to its ``READY=1`` (systemd notify socket)."""
    from tablesense.simulators.dealer import sim_config_toml

    work = Path(tempfile.mkdtemp(prefix="bench-ready-"))
    try:
        urls = {"shoe": str(work / "no-shoe"), "pads": str(work / "no-pads")}
        text = sim_config_toml("baccarat", urls=urls, host="127.0.0.1", port=9, journal=journal)
        text = text.replace("[journal]\n", f'[journal]\nkey_file = "{key_file}"\nretention_rounds = 1000000\n'
                            'retention_days = 0\nmax_size = 0\n')
        (work / "table.toml").write_text(text)
        out = []
        for _ in range(runs):
            sock_path = str(work / "notify")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(sock_path)
            sock.settimeout(300)
            env = {**os.environ, "NOTIFY_SOCKET": sock_path}
            a = time.perf_counter()
            proc = subprocess.Popen([TABLESENSE, "run", "--config", str(work / "table.toml")], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                while b"READY=1" not in sock.recv(4096):
                    pass
                out.append(time.perf_counter() - a)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
                sock.close()
                os.unlink(sock_path)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="parent directory for the journals")
    parser.add_argument("--rounds", type=int, default=400,
                        help="realistic rounds appended (default 400; a multiple of 16 ends all archived)")
    parser.add_argument("--startup-rounds", type=int, default=200_000,
                        help="rounds in the start-up journal (default 200,000; 0 skips it)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep (or reuse) the start-up journal and its key in this directory")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="bench-journal-", dir=args.dir))
    try:
        key_file = parent / "journal.key"
        key = write_new_key(key_file)
        floor = fsync_floor(parent)
        f50, f99 = pct(floor, 0.5), pct(floor, 0.99)
        print(f"floor: one fsync of 4 KiB: p50 {f50 * 1e3:.3f} ms, p99 {f99 * 1e3:.3f} ms")

        plain = appends(parent / "plain", key, args.rounds, 0.0, concurrent_prune=False)
        lat = plain["lat"]
        a50, a99 = pct(lat, 0.5), pct(lat, 0.99)
        print(f"append ({plain['inputs_round']:.0f} inputs a round, 17 spots, sealed, synchronous=FULL): "
              f"p50 {a50 * 1e3:.3f} ms = {a50 / f50:.1f}x fsync p50; p99 {a99 * 1e3:.3f} ms = "
              f"{a99 / f99:.1f}x fsync p99; CPU {plain['cpu_round'] * 1e3:.2f} ms a round")
        used, raw = plain["bytes_round"], plain["payload_round"]
        print(f"bytes per round on disk ({args.rounds} rounds, all archived, every page counted): "
              f"{used:,.0f} (goal 5,000: {used / 5000:.2f}x; the raw inputs and messages journaled: "
              f"{raw:,.0f} a round, {used / raw:.3f}x)")
        beats = appends(parent / "beats", key, args.rounds, 2.0, concurrent_prune=True)
        print(f"bytes per round with heartbeats (2 s, 45 s rounds, {beats['inputs_round']:.0f} inputs a "
              f"round): {beats['bytes_round']:,.0f} (goal 5,000: {beats['bytes_round'] / 5000:.2f}x)")
        print(f"maintenance (archive 16 rounds at a time, retention, vacuum): CPU "
              f"{plain['prune_cpu_round'] * 1e3:.2f} ms a round")
        b50, b99, bmax = pct(beats["lat"], 0.5), pct(beats["lat"], 0.99), max(beats["lat"])
        slow = sum(x > 10 * f99 for x in beats["lat"]) / len(beats["lat"])
        slow0 = sum(x > 10 * f99 for x in lat) / len(lat)
        print(f"append while maintenance runs beside it ({beats['prunes']} runs): p50 {b50 * 1e3:.3f} ms = "
              f"{b50 / f50:.1f}x fsync p50; p99 {b99 * 1e3:.3f} ms = {b99 / f99:.1f}x fsync p99; max "
              f"{bmax * 1e3:.1f} ms; over 10x fsync p99: {slow:.2%} of appends (without maintenance: max "
              f"{max(lat) * 1e3:.1f} ms, {slow0:.2%})")
        held = beats["holds"]
        print(f"maintenance holds the journal lock {len(held)} times: p99 {pct(held, 0.99) * 1e3:.2f} ms, "
              f"longest {max(held) * 1e3:.2f} ms = {max(held) / f99:.1f}x fsync p99 (an append waits at most "
              "that long for it)")

        if args.startup_rounds:
            empty = parent / "empty"
            empty.mkdir()
            ready_empty = time_to_ready(empty, key_file)
            if args.keep is not None and (args.keep / "journal" / "journal.sqlite").exists():
                big, big_key = args.keep / "journal", args.keep / "journal.key"
                print(f"start-up journal reused from {big}")
            else:
                base = args.keep if args.keep is not None else parent
                base.mkdir(parents=True, exist_ok=True)
                big, big_key = base / "journal", base / "journal.key"
                if not big_key.exists():
                    write_new_key(big_key)
                a = time.perf_counter()
                built, inputs = build_startup_journal(big, big_key.read_bytes(), args.startup_rounds)
                print(f"start-up journal built: {built:,} rounds, {inputs:,} inputs in "
                      f"{time.perf_counter() - a:.0f} s")
            size = sum(f.stat().st_size for f in big.iterdir())
            ready = time_to_ready(big, big_key)
            e50, r50 = statistics.median(ready_empty), statistics.median(ready)
            print(f"start-up (process start to READY=1): empty journal {e50:.2f} s (floor); "
                  f"{args.startup_rounds:,} rounds ({size / 1e6:,.0f} MB) {r50:.2f} s (runs: "
                  f"{', '.join(f'{r:.2f}' for r in ready)}) = {r50 / e50:.1f}x the floor, goal 2 s")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
