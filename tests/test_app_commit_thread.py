"""Where journal commits run (``App._commit``): on the event loop while the disk is quick, in a worker
thread for a while after a slow commit, so that a slow disk does not stall the loop at every commit.
Either way an input is acknowledged only after its commit and the machine equals its journal's replay."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from machine_support import PADS, SHOE, baccarat_config
from test_app_group_commit import IDENT, bets, equals_replay, journaled

import tablesense.daemon.app as app_module
from tablesense.daemon.app import App
from tablesense.drivers.events import ShoeStatus, ShoeStatusKind


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    a = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'))
    a.open()
    yield a
    if a.journal is not None:
        a.journal.close()


def commits_seen(app: App, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> list[bool]:
    """Record, for every commit, whether it ran on the calling (event loop) thread; ``delay``: seconds
    each one takes beyond the real commit (a slow disk)."""
    assert app.journal is not None
    real_many = app.journal.append_many
    loop_thread = threading.get_ident()
    on_loop: list[bool] = []

    def many(items: Any) -> Any:
        on_loop.append(threading.get_ident() == loop_thread)
        time.sleep(delay)
        return real_many(items)

    monkeypatch.setattr(app.journal, "append_many", many)
    monkeypatch.setattr(app.journal, "append", lambda inp, emits: many([(inp, emits)])[0])
    return on_loop


async def test_commits_run_on_the_event_loop_while_the_disk_is_quick(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "SLOW_COMMIT", 10.0)  # "quick", also on a loaded machine
    on_loop = commits_seen(app, monkeypatch)
    assert await app._process_devices([IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), *bets(1)])
    assert await app._process_devices(bets(6))
    assert on_loop and all(on_loop)
    assert app.slow_commits == 0
    assert app.last_ack == {SHOE: 1, PADS: 10} and equals_replay(app)


async def test_a_slow_commit_moves_the_commits_to_a_worker_thread_for_a_while(
        app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(app_module, "SLOW_COMMIT", 0.02)
    on_loop = commits_seen(app, monkeypatch, delay=0.04)
    assert await app._process_devices([IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), *bets(1)])
    assert on_loop == [True]  # the slow one ran on the loop: measured, then the next ones go to a thread
    assert app.slow_commits == 1
    assert "journal_commit_slow" in capsys.readouterr().out
    assert await app._process_devices(bets(6))
    assert on_loop == [True, False]
    assert app.last_ack == {SHOE: 1, PADS: 10} and equals_replay(app)
    assert journaled(app)[-5:] == bets(6)
    # the hold is over: back on the loop (and, the disk quick again, it stays there)
    app._commits_in_thread_until = time.monotonic() - 1
    monkeypatch.setattr(app_module, "SLOW_COMMIT", 10.0)
    assert await app._process_devices(bets(11))
    assert on_loop == [True, False, True] and app.slow_commits == 1
    assert app.last_ack == {SHOE: 1, PADS: 15} and equals_replay(app)


async def test_a_commit_goes_to_a_worker_thread_while_another_thread_holds_the_journal(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """A maintenance step (or a recall read) holds the journal's lock: the commit waits for it in a
    worker thread, never on the loop, and is not taken for a slow disk."""
    assert app.journal is not None
    monkeypatch.setattr(app_module, "SLOW_COMMIT", 10.0)
    on_loop = commits_seen(app, monkeypatch)
    held, release = threading.Event(), threading.Event()

    def maintenance_step() -> None:
        assert app.journal is not None
        with app.journal._lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=maintenance_step)
    holder.start()
    try:
        assert held.wait(5)
        commit = asyncio.create_task(app._process_devices(
            [IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), *bets(1)]))
        ticks = 0
        while not on_loop:  # the loop keeps running while the commit waits for the lock
            await asyncio.sleep(0.01)
            ticks += 1
            assert ticks < 500
        await asyncio.sleep(0.05)
        assert not commit.done()
    finally:
        release.set()
        holder.join()
    assert await commit
    assert on_loop == [False] and app.slow_commits == 0
    assert app.last_ack == {SHOE: 1, PADS: 5} and equals_replay(app)


def test_each_slow_commit_doubles_the_hold_and_a_quiet_spell_resets_it(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """One hiccup of a good disk costs a short hold (10 s of commits in a thread, each costing several
    times its CPU there), a disk that stays slow stalls the loop at most once per hold, the hold doubling
    up to 10 minutes; after 10 minutes without a slow commit the next hold is short again."""

    class Clock:
        now = 5000.0

        def monotonic(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(app_module, "time", clock)
    holds = []
    for _ in range(8):  # slow every time it is tried on the loop again
        app._check_commit_time(app_module.SLOW_COMMIT + 0.5)
        holds.append(app._commits_in_thread_until - clock.now)
        clock.now = app._commits_in_thread_until + 0.1  # the hold is over: the next commit on the loop
    assert holds == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 600.0, 600.0]
    assert app.slow_commits == 8
    app._check_commit_time(app_module.SLOW_COMMIT - 0.01)  # a quick one changes nothing
    assert app.slow_commits == 8
    clock.now += app_module.SLOW_COMMIT_HOLD + 1  # a quiet spell
    app._check_commit_time(1.0)
    assert app._commits_in_thread_until - clock.now == 10.0 and app.slow_commits == 9
