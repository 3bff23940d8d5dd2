"""The journal's maintenance (archive, retention, space) runs on the app's event loop a step at a time,
device inputs first: never in a worker thread that has to take the interpreter lock back from the busy
loop at every SQLite statement (docs/performance.md "Maintenance on the loop"), never blocking the loop
on the journal's lock, never starved by a flood of inputs, and all of it in a worker thread while a slow
disk sends the commits there. A step the journal announces as long (``OFF_LOOP``: many messages
awaiting the broker, an unusually large archive unit) runs in a worker thread.

No broker is needed: the app is driven through its input path (``App._process_devices``) with the
device frames of realistic 17-spot baccarat rounds (the simulators through the real codec).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_support import RealTable

import tablesense.daemon.app as app_module
from tablesense.daemon.app import App
from tablesense.daemon.config import parse_config
from tablesense.daemon.journal import Journal
from tablesense.daemon.table.inputs import TableStart
from tablesense.drivers.events import CardDrawn, DeviceEvent
from tablesense.simulators.dealer import sim_config_toml


def rounds(n: int, seed: int = 5) -> list[list[DeviceEvent]]:
    """The device frames of ``n`` rounds, one list per round."""
    table = RealTable(seed=seed)
    return [[inp.event for inp, _ in table.round() if not isinstance(inp.event, TableStart)]
            for _ in range(n)]


def groups(frames: list[DeviceEvent]) -> Iterator[list[DeviceEvent]]:
    """The frames as the input task takes them at pace 0: chips together, each card alone."""
    group: list[DeviceEvent] = []
    for frame in frames:
        group.append(frame)
        if isinstance(frame, CardDrawn) or len(group) >= 17:
            yield group
            group = []
    if group:
        yield group


@pytest.fixture
def journal_dir() -> Iterator[Path]:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None  # no fsync cost: the test is about threads
    with tempfile.TemporaryDirectory(dir=base) as d:
        yield Path(d)


@pytest.fixture
async def app(journal_dir: Path) -> AsyncIterator[App]:
    config = parse_config(sim_config_toml("baccarat", urls={"shoe": "/dev/null", "pads": "/dev/null"},
                                          host="127.0.0.1", port=1, journal=journal_dir, table="bac-01"))
    a = App(config)
    a.open()
    await a._announce()
    yield a
    a.stop()
    if a._prune_task is not None:
        if a.journal is not None:
            a.journal.stop_maintenance()
        await asyncio.gather(a._prune_task, return_exceptions=True)
    if a.journal is not None:
        a.journal.close()


async def deal(app: App, frames: list[list[DeviceEvent]]) -> None:
    for rnd in frames:
        for group in groups(rnd):
            assert await app._process_devices(group)
            app.relay._handed.clear()  # type: ignore[union-attr]  # no broker: nothing to publish to


def record_step_threads(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads in which the maintenance steps (the archive's) run, one name per step."""
    seen: list[str] = []
    archive = journal._archive_closed

    def recorded() -> Any:
        for step in archive():
            seen.append(threading.current_thread().name)
            yield step

    monkeypatch.setattr(journal, "_archive_closed", recorded)
    return seen


async def maintenance_done(app: App, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while app._pruning():
        assert time.monotonic() < deadline, "maintenance did not end"
        await asyncio.sleep(0.005)


async def test_maintenance_steps_run_on_the_loop_and_archive(app: App, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    assert app.journal is not None
    threads = record_step_threads(app.journal, monkeypatch)
    await deal(app, rounds(40))
    await maintenance_done(app)
    assert app.prunes >= 1
    assert threads, "no archive step ran"
    assert set(threads) == {threading.main_thread().name}, f"steps ran in {sorted(set(threads))}"
    archived = app.journal._db().execute("SELECT COUNT(*) FROM blocks WHERE unit != 0").fetchone()[0]
    assert archived >= 16  # at least one archive unit made by the loop's steps
    assert not app.journal._maintenance.locked()


async def test_inputs_go_between_maintenance_steps(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Device inputs that arrive while maintenance runs are journaled and acknowledged before it ends:
    maintenance gives the loop back after each slice of steps."""
    assert app.journal is not None
    await deal(app, rounds(32, seed=6))
    await maintenance_done(app)
    more = rounds(12, seed=7)
    monkeypatch.setattr(app_module, "_MAINTENANCE_SLICE", 0.0)  # one step a turn: many turns
    app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
    app._start_prune()
    assert app._pruning()
    acked_during: list[int] = []
    for rnd in more:
        for group in groups(rnd):
            assert await app._process_devices(group)
            app.relay._handed.clear()  # type: ignore[union-attr]
            if app._pruning():
                acked_during.append(app.last_ack.get("pads", -1))
            await asyncio.sleep(0)
    assert acked_during, "maintenance ended before any input: nothing shown"
    assert len(set(acked_during)) > 1, "no input was acknowledged while maintenance ran"
    await maintenance_done(app)


async def test_a_lock_held_by_another_thread_never_blocks_the_loop(app: App) -> None:
    """A recall or replay read (or a command's commit) holds the journal's lock in a worker thread:
    maintenance waits for it without blocking the loop, then finishes."""
    assert app.journal is not None
    await deal(app, rounds(20, seed=8))
    await maintenance_done(app)
    held = threading.Event()
    release = threading.Event()

    def reader() -> None:
        with app.journal._lock:  # type: ignore[union-attr]
            held.set()
            release.wait(5)

    holder = threading.Thread(target=reader)
    holder.start()
    assert held.wait(5)
    try:
        app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
        app._start_prune()
        gaps: list[float] = []
        last = time.monotonic()
        for _ in range(30):  # 0.3 s of a loop that must keep turning
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
        assert app._pruning()  # still waiting for the lock
        assert max(gaps) < 0.2, f"the loop stood still for {max(gaps):.3f} s"
    finally:
        release.set()
        holder.join()
    await maintenance_done(app)


async def test_a_flood_of_inputs_does_not_postpone_maintenance_for_ever(app: App) -> None:
    assert app.journal is not None
    await deal(app, rounds(20, seed=9))
    await maintenance_done(app)
    app._devices_waiting += 1  # a device input always waiting for the commit lock
    try:
        app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
        app._start_prune()
        await maintenance_done(app, timeout=20.0)
    finally:
        app._devices_waiting -= 1


async def test_after_a_slow_commit_maintenance_runs_in_a_worker_thread(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow disk (commits sent to a worker thread after a slow one): maintenance, which writes to the
    same disk, goes there too, never on the loop."""
    assert app.journal is not None
    threads = record_step_threads(app.journal, monkeypatch)
    app._commits_in_thread_until = time.monotonic() + 3600
    await deal(app, rounds(40, seed=10))
    await maintenance_done(app)
    assert app.prunes >= 1 and threads
    assert threading.main_thread().name not in threads


async def test_stopping_ends_maintenance_and_frees_it(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert app.journal is not None
    await deal(app, rounds(40, seed=11))
    await maintenance_done(app)
    await deal(app, rounds(20, seed=12))
    monkeypatch.setattr(app_module, "_MAINTENANCE_SLICE", 0.0)
    app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
    app._start_prune()
    await asyncio.sleep(0)
    app.stop()
    app.journal.stop_maintenance()
    assert app._prune_task is not None
    await asyncio.wait_for(app._prune_task, 5)
    assert not app.journal._maintenance.locked()


def thread_of_calls(target: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread of every call of ``target.name`` from now on."""
    seen: list[str] = []
    real = getattr(target, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, recorded)
    return seen


def unacknowledged(journal_dir: Path, rounds_dealt: int) -> None:
    """A journal of ``rounds_dealt`` rounds none of whose messages the broker acknowledged (a long
    broker outage), its closed blocks archived."""
    table = RealTable(seed=3)
    with Journal(journal_dir, "bac-01", retention_rounds=10) as j:
        for _ in range(rounds_dealt):
            j.append_many(table.round())
        j.prune()


async def test_blocks_holding_waiting_messages_are_looked_up_once_each(
        journal_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a broker outage thousands of messages await it; retention keeps their blocks, and finding
    them cost one query per message (5 us each, all in one step: 93 ms for 600 rounds of messages), now
    one per block."""
    import tablesense.daemon.journal.store as store

    unacknowledged(journal_dir, 200)  # over two shoes: the first is below the replay
    with Journal(journal_dir, "bac-01", retention_rounds=10) as j:
        waiting = j.pending_count()
        assert waiting > 1_000
        lookups = thread_of_calls(store.bk, "block_of_seq", monkeypatch)
        j.prune()
        blocks = j._db().execute("SELECT count(*) FROM blocks").fetchone()[0]
    assert 0 < len(lookups) <= blocks + 1, f"{len(lookups)} lookups for {waiting} messages in {blocks} blocks"


async def test_a_retention_step_through_many_waiting_messages_runs_beside_the_loop(
        journal_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tablesense.daemon.journal.store as store

    unacknowledged(journal_dir, 30)
    monkeypatch.setattr(store, "LONG_PENDING", 100)
    config = parse_config(sim_config_toml("baccarat", urls={"shoe": "/dev/null", "pads": "/dev/null"},
                                          host="127.0.0.1", port=1, journal=journal_dir, table="bac-01"))
    a = App(config)
    a.open()
    try:
        assert a.journal is not None and a.journal.pending_count() > 100
        threads = thread_of_calls(a.journal, "_protected", monkeypatch)
        a._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
        a._start_prune()
        await maintenance_done(a)
        assert a.prunes == 1 and threads
        assert threading.main_thread().name not in threads, threads
    finally:
        a.stop()
        if a.journal is not None:
            a.journal.close()


async def test_a_large_archive_unit_is_compressed_beside_the_loop(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    import tablesense.daemon.journal.store as store

    assert app.journal is not None
    monkeypatch.setattr(store, "LONG_UNIT_BYTES", 0)  # every unit counts as large
    packs = thread_of_calls(store, "pack_unit", monkeypatch)
    steps = record_step_threads(app.journal, monkeypatch)
    await deal(app, rounds(40, seed=13))
    await maintenance_done(app)
    assert packs and threading.main_thread().name not in packs, packs
    assert threading.main_thread().name in steps  # the other steps stay on the loop
    archived = app.journal._db().execute("SELECT COUNT(*) FROM blocks WHERE unit != 0").fetchone()[0]
    assert archived >= 16


async def test_a_slow_commit_during_maintenance_sends_its_remaining_steps_to_a_worker_thread(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert app.journal is not None
    await deal(app, rounds(20, seed=14))
    await maintenance_done(app)
    await deal(app, rounds(20, seed=15))
    monkeypatch.setattr(app_module, "_MAINTENANCE_SLICE", 0.0)  # one step a turn
    threads = record_step_threads(app.journal, monkeypatch)
    app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
    app._start_prune()
    while len(threads) < 3:  # a few steps on the loop first
        await asyncio.sleep(0)
    assert set(threads) == {threading.main_thread().name}
    app._check_commit_time(app_module.SLOW_COMMIT + 1.0)  # as after a commit on a slow disk
    on_loop = len(threads)
    await maintenance_done(app)
    assert len(threads) > on_loop
    assert threading.main_thread().name not in threads[on_loop + 1:], threads[on_loop:]


async def test_cancelling_run_starts_no_maintenance_after_shutdown(
        journal_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``App.run`` cancelled (not stopped) while maintenance runs and more is due: the shutdown waits for
    the running maintenance and starts none after it (the journal is closed by then)."""
    config = parse_config(sim_config_toml("baccarat", urls={"shoe": "/dev/null", "pads": "/dev/null"},
                                          host="127.0.0.1", port=1, journal=journal_dir, table="bac-01"))
    a = App(config)
    started: list[float] = []

    async def slow_maintain(self: App, journal: Journal) -> int:
        started.append(time.monotonic())
        await asyncio.sleep(0.1)
        return 0

    monkeypatch.setattr(App, "_maintain", slow_maintain)
    task = asyncio.create_task(a.run())
    await asyncio.wait_for(a.ready.wait(), 10)
    a._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS
    a._start_prune()
    await asyncio.sleep(0.01)
    a._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS  # due again when this one ends
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)  # a maintenance started by the first one's end would have begun by now
    assert len(started) == 1
    assert a._prune_task is not None and a._prune_task.done()
