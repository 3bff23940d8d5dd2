#!/usr/bin/env python3
"""Benchmark: the write-ahead journal with ``synchronous=FULL`` (not a test, nothing asserted).

Run: ``.venv/bin/python benchmarks/bench_journal.py [--dir DIR] [--appends N] [--rows N]``. ``--dir``
should be on the disk the journal will live on (default: a fresh directory under the system temp dir;
``/dev/shm`` would measure memory, not an fsync). Prints:

* appends per second for the inputs of scripted baccarat rounds (a bet, four cards, the round-end
  button: 0-3 messages each), each append one committed, fsynced transaction; latency p50 / p99;
* mark_delivered per second (no fsync of its own, see docs/journal.md);
* pending(limit=100) over a backlog of ``--rows`` undelivered rows (broker down for hours);
* opening the journal with that backlog (integrity check + every row's CRC) and recall of the last 10
  rounds;
* the file sizes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from journal_support import Traffic  # the tests' scripted table traffic

from tablesense.daemon.journal import Journal, open_for_recall
from tablesense.daemon.messages import DeviceStatus
from tablesense.daemon.table.inputs import Channel, Emit


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="parent directory for the journal")
    parser.add_argument("--appends", type=int, default=2000, help="fsynced appends to time (default 2000)")
    parser.add_argument("--rows", type=int, default=100_000, help="undelivered backlog rows (default 100k)")
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="bench-journal-", dir=args.dir))
    try:
        directory = parent / "journal"
        traffic = Traffic()
        with Journal(directory, "bench") as j:
            for inp, emits in traffic.new_shoe():
                j.append(inp, emits)
            steps = []
            while len(steps) < args.appends:
                steps += traffic.baccarat_round()
            steps = steps[: args.appends]
            lat: list[float] = []
            t0 = time.perf_counter()
            for inp, emits in steps:
                a = time.perf_counter()
                j.append(inp, emits)
                lat.append(time.perf_counter() - a)
            total = time.perf_counter() - t0
            rows = sum(len(e) for _, e in steps)
            print(f"append (synchronous=FULL, {rows / len(steps):.2f} messages each): "
                  f"{len(steps) / total:,.0f} appends/s, {rows / total:,.0f} messages/s; "
                  f"latency p50 {_pct(lat, 0.5) * 1e3:.2f} ms, p99 {_pct(lat, 0.99) * 1e3:.2f} ms, "
                  f"max {max(lat) * 1e3:.2f} ms")
            pend = j.pending(limit=rows + 10)
            t0 = time.perf_counter()
            for row in pend:
                j.mark_delivered(row.row_id)
            total = time.perf_counter() - t0
            print(f"mark_delivered: {len(pend) / total:,.0f} /s")
            # a backlog: the broker unreachable for hours (100 device-status messages per append keeps the
            # set-up short; they belong to no round, so recall below still reads ordinary rounds)
            inp, _ = traffic.heartbeat()
            status = Emit(Channel.DEVICE, DeviceStatus(table="bench", ts=inp.ts, name="shoe", state="online"),
                          device="shoe", retain=True)
            t0 = time.perf_counter()
            for _ in range(args.rows // 100):
                inp, _ = traffic.heartbeat()
                j.append(inp, [status] * 100)
            took = time.perf_counter() - t0
            print(f"backlog of {j.pending_count():,} undelivered rows written in {took:.1f} s")
            reads: list[float] = []
            after = 0
            for _ in range(200):
                a = time.perf_counter()
                got = j.pending(limit=100, after_row=after)
                reads.append(time.perf_counter() - a)
                after = got[-1].row_id
            print(f"pending(limit=100) over the backlog: median {statistics.median(reads) * 1e3:.2f} ms")
            t0 = time.perf_counter()
            n = j.pending_count()
            print(f"pending_count() = {n:,}: {(time.perf_counter() - t0) * 1e3:.1f} ms")
        t0 = time.perf_counter()
        Journal(directory, "bench").close()
        print(f"open with integrity check and row CRCs: {time.perf_counter() - t0:.2f} s")
        t0 = time.perf_counter()
        with open_for_recall(directory) as reader:
            opened = time.perf_counter()
            got_rounds = reader.rounds(last=10)
        print(f"recall: open with quick_check {(opened - t0) * 1e3:.0f} ms, the last {len(got_rounds)} "
              f"rounds {(time.perf_counter() - opened) * 1e3:.1f} ms")
        size = sum(f.stat().st_size for f in directory.iterdir())
        print(f"journal size on disk: {size / 1e6:.1f} MB for {n + rows:,} rows")
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
