"""Frames received intact during a journal outage are never dropped and never acknowledged over
(docs/protocol.md §3, breaker report item 5), whichever step of the intake finds the journal failing:

* the host's own retry of a failed frame after :data:`RESEND_WAIT` (``App._release_held``) fails again:
  the frames held back behind it stay held (they were dropped, and a later frame's release carried a
  ``SEQUENCE_GAP`` whose cumulative ``AK`` made the shoe discard them);
* a failed group commit (``App._group_failed``) keeps the frames held back before the group;
* a due frame whose write fails alone during the outage (``App._intake``) keeps the frames held behind it.

No broker: ``App.open`` builds the relay without connecting; acknowledgements are read from
``App.last_ack`` (what the links would send). The journal's writes fail while ``Disk.full`` is set, as
with ``SQLITE_FULL``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from machine_support import PADS, SHOE, baccarat_config

from tablesense.daemon.app import RESEND_WAIT, App
from tablesense.daemon.journal import JournalUnwritable
from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Disk:
    """Makes the app's journal writes (single and group) fail while ``full`` is set."""

    def __init__(self, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
        assert app.journal is not None
        self.full = False
        self.failures = 0
        real_one, real_many = app.journal.append, app.journal.append_many

        def one(inp: Any, emits: Any) -> Any:
            self._check()
            return real_one(inp, emits)

        def many(items: Any) -> Any:
            self._check()
            return real_many(items)

        monkeypatch.setattr(app.journal, "append", one)
        monkeypatch.setattr(app.journal, "append_many", many)

    def _check(self) -> None:
        if self.full:
            self.failures += 1
            raise JournalUnwritable("journal .../journal.sqlite: database or disk is full (test)")


@pytest.fixture
async def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[App, Clock, Disk]]:
    clock = Clock()
    a = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'), clock=clock)
    a.open()
    disk = Disk(a, monkeypatch)
    for f in (DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN12345", "b"),
              ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE)):
        assert await a._process_device(f)
    assert await a._process_device(DealerButton(PADS, 1, Button.NO_MORE_BETS))
    yield a, clock, disk
    if a.journal is not None:
        a.journal.close()


def card(seq: int, text: str) -> CardDrawn:
    return CardDrawn(SHOE, seq, Card.parse(text))


def cards_journaled(app: App) -> list[tuple[int, str]]:
    assert app.journal is not None
    return [(inp.event.seq, str(inp.event.card)) for inp in app.journal.replay_inputs()
            if isinstance(inp.event, CardDrawn)]


def alarm_codes(app: App) -> list[str]:
    assert app.journal is not None
    out = []
    for row in app.journal.pending(limit=100000):
        body = json.loads(row.payload)
        if body.get("schema") == "tablesense.alarm" and body["state"] == "raised":
            out.append(body["code"])
    return out


def equals_replay(app: App) -> bool:
    assert app.machine is not None
    return bool(app.machine.snapshot() == app._rebuilt_machine().snapshot())


async def test_a_failed_retry_by_the_host_keeps_the_frames_held_behind_it(
        rig: tuple[App, Clock, Disk]) -> None:
    """The breaker's scenario without processes: card A's write fails, B and C are held behind it, the
    host's retry of A after RESEND_WAIT fails too (the disk is still full), D comes; space returns and
    no device resends. A, B, C, D are journaled in order, no gap alarm, AK D only then."""
    a, clock, disk = rig
    disk.full = True
    assert not await a._process_device(card(2, "AH"))  # A: not journaled
    assert not await a._process_device(card(3, "7H"))  # B, C: held back behind A
    assert not await a._process_device(card(4, "AD"))
    assert a.last_ack[SHOE] == 1
    clock.now += RESEND_WAIT + 0.1
    failures = disk.failures
    await a._timer_step()  # the host retries A itself: fails again
    assert disk.failures > failures
    assert a.last_ack[SHOE] == 1
    assert a._failed[SHOE][0] == card(2, "AH")
    assert list(a._waits[SHOE].held) == [3, 4]  # B and C still held, not dropped
    assert not await a._process_device(card(5, "9C"))  # D: held behind A too
    disk.full = False  # space again; the shoe does not resend
    await a._timer_step()
    assert a.last_ack[SHOE] == 1  # the kept frames wait a full RESEND_WAIT again
    clock.now += RESEND_WAIT + 0.1
    await a._timer_step()
    assert cards_journaled(a) == [(2, "AH"), (3, "7H"), (4, "AD"), (5, "9C")]
    assert a.last_ack[SHOE] == 5
    assert "SEQUENCE_GAP" not in alarm_codes(a)
    assert not a._waits and not a._failed
    assert equals_replay(a)


async def test_a_failed_group_commit_keeps_the_frames_held_back_before_the_group(
        rig: tuple[App, Clock, Disk]) -> None:
    """Cards 2 and 3 are lost on the line, card 4 is held back; the shoe resends card 2 (not 3: it
    resends what it still has), committed in a group that fails. Card 4 (received intact, not in the
    group) stays held behind card 2; after RESEND_WAIT the host journals card 2, then card 4 carrying
    the gap of card 3 (SEQUENCE_GAP, on record), and only then acknowledges 4."""
    a, clock, disk = rig
    assert not await a._process_device(card(4, "9S"))  # cards 2, 3 lost: 4 held back
    disk.full = True
    assert not await a._process_device(card(2, "7D"))  # the resend: its group commit fails
    assert a.last_ack[SHOE] == 1
    assert a._failed[SHOE][0] == card(2, "7D")
    assert list(a._waits[SHOE].held) == [4]  # not dropped with the failed group
    disk.full = False
    clock.now += RESEND_WAIT + 0.1
    await a._timer_step()
    assert cards_journaled(a) == [(2, "7D"), (4, "9S")]
    assert a.last_ack[SHOE] == 4
    assert alarm_codes(a).count("SEQUENCE_GAP") == 1  # the loss of card 3, on record before AK 4
    assert equals_replay(a)


async def test_a_due_frame_failing_alone_during_an_outage_keeps_the_frames_held_behind_it(
        rig: tuple[App, Clock, Disk]) -> None:
    """During an outage every input is written alone: card 2 is lost on the line, card 3 held back, and
    the resend of card 2 fails. Card 3 stays held behind it and follows it, with no gap."""
    a, clock, disk = rig
    disk.full = True
    assert not await a._process_device(Heartbeat(PADS, 2))  # the outage begins with the pads
    assert a._outage is not None
    assert not await a._process_device(card(3, "9S"))  # card 2 lost: 3 held back
    assert not await a._process_device(card(2, "7D"))  # the resend fails alone
    assert a._failed[SHOE][0] == card(2, "7D")
    assert list(a._waits[SHOE].held) == [3]
    disk.full = False
    clock.now += RESEND_WAIT + 0.1
    await a._timer_step()
    assert cards_journaled(a) == [(2, "7D"), (3, "9S")]
    assert a.last_ack[SHOE] == 3
    assert a.last_ack[PADS] == 2  # the pads' heartbeat was applied by the host too
    assert "SEQUENCE_GAP" not in alarm_codes(a)
    assert equals_replay(a)
