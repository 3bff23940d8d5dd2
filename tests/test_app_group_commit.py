"""Group commit: device inputs that arrive together are applied in order and journaled in ONE
transaction (one fsync) before any of them is acknowledged; a failed group
commit acknowledges none of them and leaves the machine equal to its journal's replay.

No broker is needed: acknowledgements are read from ``App.last_ack`` (what the links would send).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from machine_support import PADS, SHOE, baccarat_config

from tablesense.daemon.app import App
from tablesense.daemon.journal import JournalUnwritable
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.machine import TableMachine
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceIdentity,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    a = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'))
    a.open()
    yield a
    if a.journal is not None:
        a.journal.close()


def journaled(app: App) -> list[Any]:
    assert app.journal is not None
    return [inp.event for inp in app.journal.replay_inputs()]


def equals_replay(app: App) -> bool:
    assert app.machine is not None
    rebuilt: TableMachine = app._rebuilt_machine()
    return bool(app.machine.snapshot() == rebuilt.snapshot())


IDENT = DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN12345", "b")


def bets(start: int) -> list[SpotChanged]:
    """Chips on five spots, pad frames ``start``..``start + 4``."""
    spots = ["1P", "2P", "3P", "4P", "5P"]
    return [SpotChanged(PADS, start + i, s, SpotState.PLACED, 100) for i, s in enumerate(spots)]


async def test_inputs_that_arrive_together_are_one_transaction_acknowledged_after_it(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert app.journal is not None
    calls: list[tuple[int, dict[str, int]]] = []  # every transaction (append is append_many of one)
    real_many = app.journal.append_many

    def many(items: Any) -> Any:
        calls.append((len(items), dict(app.last_ack)))
        return real_many(items)

    monkeypatch.setattr(app.journal, "append_many", many)
    frames = [IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE),
              *bets(1)]
    assert await app._process_devices(frames)
    assert calls == [(7, {})]  # one transaction, and nothing acknowledged before it
    assert app.last_ack == {SHOE: 1, PADS: 5}  # then each device's last frame, cumulatively
    assert journaled(app)[-7:] == frames  # in arrival order
    assert equals_replay(app)


async def test_the_input_task_groups_what_queued_up_during_a_commit(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """The running input task: frames queued while a commit runs go into the next commit together."""
    assert app.journal is not None
    sizes: list[int] = []  # inputs per transaction (append is append_many of one)
    real_many = app.journal.append_many

    def many(items: Any) -> Any:
        sizes.append(len(items))
        return real_many(items)

    monkeypatch.setattr(app.journal, "append_many", many)
    for ev in bets(1):
        app.queue.put_nowait(ev)
    task = asyncio.create_task(app._inputs())
    try:
        async with asyncio.timeout(10):
            while app.last_ack.get(PADS) != 5:
                await asyncio.sleep(0.005)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sizes[0] == 1  # the TableStart announcement goes alone
    assert sizes[1:] == [5]  # the five queued frames: one commit, not five
    assert equals_replay(app)


async def test_a_failed_group_commit_acknowledges_none_of_it_and_the_frames_are_taken_again(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    assert app.journal is not None
    assert await app._process_devices([IDENT,
                                       ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), *bets(1)])
    real_many = app.journal.append_many
    failing = {"on": True}

    def many(items: Any) -> Any:
        if failing["on"]:
            raise JournalUnwritable("journal: database or disk is full (injected)")
        return real_many(items)

    monkeypatch.setattr(app.journal, "append_many", many)
    group = [DealerButton(PADS, 6, Button.NO_MORE_BETS), CardDrawn(SHOE, 2, Card.parse("7D")),
             CardDrawn(SHOE, 3, Card.parse("9S"))]
    before = journaled(app)
    assert not await app._process_devices(group)
    assert app.last_ack == {SHOE: 1, PADS: 5}  # no acknowledgement covers any frame of the group
    assert journaled(app) == before and equals_replay(app)
    assert app.journal_failures == 3
    failing["on"] = False
    # the devices resend them: taken again, in order (the shoe's 9S, held back behind 7D since the
    # failure, is applied with it, so its resend is dropped as one)
    await app._process_devices(group)
    assert app.last_ack == {SHOE: 3, PADS: 6}
    cards = [str(e.card) for e in journaled(app) if isinstance(e, CardDrawn)]
    assert cards == ["7D", "9S"]  # exactly once
    assert equals_replay(app)


async def test_a_failed_group_keeps_its_later_frames_behind_the_first_for_a_device_that_never_resends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four cards in one group, the last completing the round that makes maintenance due (the group is
    committed there): the commit fails. The shoe's first card of the group is the frame due, the other
    three are held back behind it; a shoe that never resends gets all four journaled by the host after
    RESEND_WAIT, in order, with no gap on record (as when each frame failed alone and the rest came
    after)."""
    from tablesense.daemon import app as app_module

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    a = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'), clock=clock)
    a.open()
    assert a.journal is not None
    try:
        assert await a._process_devices([IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE),
                                         DealerButton(PADS, 1, Button.NO_MORE_BETS)])
        a._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS - 1  # this round makes maintenance due
        real_many = a.journal.append_many
        calls = {"n": 0}

        def many(items: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:
                raise JournalUnwritable("journal: database or disk is full (injected)")
            return real_many(items)

        monkeypatch.setattr(a.journal, "append_many", many)
        # Player 9H + KD = 9, Banker 8C + KS = 8: naturals, the fourth card completes the round
        group = [CardDrawn(SHOE, n, Card.parse(c)) for n, c in ((2, "9H"), (3, "8C"), (4, "KD"), (5, "KS"))]
        assert not await a._process_devices(group)
        assert a.last_ack[SHOE] == 1  # nothing of the group acknowledged
        assert a._failed[SHOE][0] == group[0]  # the first of the group is due, not the last
        assert list(a._waits[SHOE].held) == [3, 4, 5]  # the others held back behind it
        clock.now += app_module.RESEND_WAIT + 0.1  # the shoe does not resend (acknowledging is optional)
        await a._timer_step()
        cards = [str(e.card) for e in journaled(a) if isinstance(e, CardDrawn)]
        assert cards == ["9H", "8C", "KD", "KS"]
        assert a.last_ack[SHOE] == 5
        codes = [json.loads(r.payload).get("code") for r in a.journal.pending(limit=10_000)]
        assert "SEQUENCE_GAP" not in codes
        assert equals_replay(a)
    finally:
        a.journal.close()


async def test_inputs_stay_grouped_while_the_journal_maintenance_runs(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Maintenance due while the previous one still runs (a table dealing faster than it archives):
    the group is still ONE commit. Flushing each input alone to start maintenance at once would start
    nothing (one runs) and cost a commit per input, which slows the maintenance further."""
    import tablesense.daemon.app as app_module

    assert await app._process_devices([IDENT, ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE), *bets(1)])
    assert app.journal is not None
    release = asyncio.Event()
    app._prune_task = asyncio.create_task(release.wait())  # a maintenance still running
    app._rounds_since_prune = app_module.PRUNE_EVERY_ROUNDS  # and the next one due
    real_many = app.journal.append_many
    groups: list[int] = []

    def many(items: Any) -> Any:
        groups.append(len(items))
        return real_many(items)

    monkeypatch.setattr(app.journal, "append_many", many)
    assert await app._process_devices(bets(6))
    assert groups == [5]
    assert app.last_ack[PADS] == 10 and equals_replay(app)
    release.set()
    await app._prune_task
