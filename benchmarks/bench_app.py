#!/usr/bin/env python3
"""Benchmark: the app's input path in one process (not a test, nothing asserted).

Run: ``.venv/bin/python benchmarks/bench_app.py [--rounds 500] [--dir /dev/shm] [--profile]``.

What a round costs between the device frames and the journal, without devices, broker or relay:
``App._process_devices`` (intake, resend and order rules, the state machine, the group commit, the
acknowledgements, the metrics, the journal's maintenance every 10 rounds on the event loop; the rows
handed to the relay recorded as delivered at once, as the relay does with each PUBACK) fed the
device frames of realistic 17-spot baccarat rounds (the deploy/examples table, the simulators' frames
through the real codec) in the groups the input task takes at pace 0: the chips of a step together,
each card alone. Beside it, in the same run, its floors: the state machine alone applying the same
inputs, and the journal alone appending the same inputs and messages in the same groups (with its
maintenance every 10 rounds); the ratio app / (machine + journal) is what the app's own code adds.

``--dir``: where the journals go (default ``/dev/shm`` when present: CPU without the disk's fsync;
a directory on the disk adds it). ``--profile`` prints the app path's ``cProfile`` (per round).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from journal_support import RealTable  # noqa: E402  (the tests' realistic table traffic)

from tablesense.daemon.app import App  # noqa: E402
from tablesense.daemon.config import parse_config  # noqa: E402
from tablesense.daemon.journal import Journal  # noqa: E402
from tablesense.daemon.logging import configure  # noqa: E402
from tablesense.daemon.table.inputs import TableStart, TimedInput  # noqa: E402
from tablesense.daemon.table.machine import TableMachine  # noqa: E402
from tablesense.drivers.events import CardDrawn  # noqa: E402
from tablesense.simulators.dealer import sim_config_toml  # noqa: E402

WARM = 3


def grouped(steps: list[Any]) -> list[list[Any]]:
    """``steps`` (inputs, or ``(input, emits)``) in the groups of pace 0: chips together, cards alone."""
    out: list[list[Any]] = []
    group: list[Any] = []
    for step in steps:
        event = step[0].event if isinstance(step, tuple) else step
        group.append(step)
        if isinstance(event, CardDrawn) or len(group) >= 17:
            out.append(group)
            group = []
    if group:
        out.append(group)
    return out


def config(journal: str) -> Any:
    return parse_config(sim_config_toml("baccarat", urls={"shoe": "/dev/null", "pads": "/dev/null"},
                                        host="127.0.0.1", port=1, journal=journal, table="bac-01"))


async def app_path(directory: str, frames: list[list[Any]], profile: bool) -> float:
    """CPU seconds of the app's path over ``frames`` (one list of device events per round) after
    :data:`WARM` rounds."""
    app = App(config(tempfile.mkdtemp(dir=directory)))
    app.open()
    assert app.journal is not None and app.relay is not None
    await app._announce()

    async def feed(rounds: list[list[Any]]) -> None:
        for rnd in rounds:
            for group in grouped(rnd):
                await app._process_devices(group)
                handed = app.relay._handed  # type: ignore[union-attr]  # no broker: acknowledged at once
                if handed:
                    app.journal.try_mark_delivered([r.row_id for r in handed])  # type: ignore[union-attr]
                    handed.clear()

    await feed(frames[:WARM])
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    cpu = time.process_time()
    await feed(frames[WARM:])
    while app._pruning():  # the last maintenance counts too
        await asyncio.sleep(0.001)
    cpu = time.process_time() - cpu
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    app.journal.close()
    return cpu


def machine_alone(steps: list[list[tuple[TimedInput, Any]]]) -> float:
    """CPU seconds of a fresh state machine applying the inputs of ``steps`` after the warm rounds."""
    machine = TableMachine(config("/nonexistent"))
    for inp, _ in (s for rnd in steps[:WARM] for s in rnd):
        machine.handle(inp)
    cpu = time.process_time()
    for inp, _ in (s for rnd in steps[WARM:] for s in rnd):
        machine.handle(inp)
    return time.process_time() - cpu


def journal_alone(directory: str, steps: list[list[tuple[TimedInput, Any]]]) -> float:
    """CPU seconds of a journal appending ``steps`` in the groups of pace 0 (maintenance every 10
    rounds, acknowledgements recorded as the relay does) after the warm rounds."""
    key = os.urandom(32)
    with Journal(tempfile.mkdtemp(dir=directory), "bac-01", key=key, retention_rounds=1000) as j:
        def feed(rounds: list[list[tuple[TimedInput, Any]]]) -> None:
            for n, rnd in enumerate(rounds):
                for group in grouped(rnd):
                    rows = [r.row_id for out in j.append_many(group) for r in out]
                    if rows:
                        j.try_mark_delivered(rows)
                if n % 10 == 9:
                    j.prune()

        feed(steps[:WARM])
        cpu = time.process_time()
        feed(steps[WARM:])
        return time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    configure("warning")
    with tempfile.TemporaryDirectory() as creds:
        key = Path(creds) / "journal-key"
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        os.environ["CREDENTIALS_DIRECTORY"] = creds
        with tempfile.TemporaryDirectory(dir=args.dir) as work:
            table = RealTable(seed=11)
            steps = [[s for s in table.round() if not isinstance(s[0].event, TableStart)]
                     for _ in range(args.rounds + WARM)]
            frames = [[inp.event for inp, _ in rnd] for rnd in steps]
            n = args.rounds
            inputs = sum(len(r) for r in steps[WARM:]) / n
            messages = sum(len(e) for r in steps[WARM:] for _, e in r) / n
            app = asyncio.run(app_path(work, frames, args.profile)) / n * 1000
            machine = machine_alone(steps) / n * 1000
            journal = journal_alone(work, steps) / n * 1000
    floor = machine + journal
    print(f"{n} rounds of 17-spot baccarat, {inputs:.1f} inputs and {messages:.1f} messages a round, "
          f"journals in {args.dir or tempfile.gettempdir()}")
    print(f"{'figure':48s}{'ms/round':>10s}")
    print(f"{'app path (intake, machine, journal, acks, maintenance)':48s}{app:10.3f}")
    print(f"{'  floor: state machine alone':48s}{machine:10.3f}")
    print(f"{'  floor: journal alone, same groups':48s}{journal:10.3f}")
    print(f"{'app / (machine + journal)':48s}{app / floor:10.2f}x")
    print(f"app's own code: {app - floor:.3f} ms a round, {1000 * (app - floor) / inputs:.1f} us an input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
