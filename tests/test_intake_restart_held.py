"""Frames held back behind a lost one when the device restarts (a new session) are kept: journaled, the
first with the gap, before the restart, never dropped (docs/protocol.md §3, §5 step 5). The real intake
(``App``) and journal, no broker (see ``intake_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from intake_support import (
    Clock,
    card,
    cards_journaled,
    equals_replay,
    feed,
    open_coup,
    opened_app,
    public_round,
    raised,
    release,
)
from machine_support import SHOE

from tablesense.daemon.app import App
from tablesense.daemon.journal import JournalUnwritable
from tablesense.drivers.events import DeviceIdentity, Heartbeat


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[App, Clock]]:
    async for pair in opened_app(tmp_path):
        yield pair


async def test_frames_held_back_at_a_restart_are_journaled_with_the_gap(app: tuple[App, Clock]) -> None:
    """Card frame 3 is lost, 4 (2C) and 5 (4S) are held back waiting for it, then the shoe restarts (a
    new session). The two cards received intact are journaled (the first with the gap), not dropped;
    the round is held by the gap and the restart (docs/protocol.md §3: kept, never dropped)."""
    a, clock = app
    await open_coup(a)
    await feed(a, card(2, "2H"), card(4, "2C"), card(5, "4S"))
    assert a.held_back == 2
    await feed(a, DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN1", "s2"))
    await release(a, clock)
    assert cards_journaled(a) == [(2, "2H"), (4, "2C"), (5, "4S")]
    codes = raised(a)
    assert ("SEQUENCE_GAP", True) in codes and ("DEVICE_RESTARTED", True) in codes
    assert public_round(a)["held"]
    assert a._waits == {} and a._failed == {}
    assert a.machine is not None and a.machine.last_seq(SHOE) == 0 and a.machine.session(SHOE) == "s2"
    assert equals_replay(a)


async def test_frames_of_the_new_session_behind_a_restart_are_applied_in_order(
        app: tuple[App, Clock]) -> None:
    """After a restart its new frames follow in order, no gap (the old session's held frames, applied
    before the restart, do not make its frames 1, 2 look ahead of anything)."""
    a, _ = app
    await open_coup(a)
    await feed(a, card(2, "2H"), card(4, "2C"),
               DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN1", "s2"), Heartbeat(SHOE, 1),
               Heartbeat(SHOE, 2))
    assert a._waits == {}
    assert a.last_ack[SHOE] == 2
    assert [c for c, _ in raised(a)].count("SEQUENCE_GAP") == 1
    assert equals_replay(a)


async def test_frames_behind_a_restart_whose_journaling_failed_follow_it(
        app: tuple[App, Clock], monkeypatch: pytest.MonkeyPatch) -> None:
    """The restart's identity frame cannot be journaled (a full disk); the device's next frames 1 and 2
    are held back behind it (received intact). When the identity frame is taken (resent), 1 and 2
    follow it in order: journaled, acknowledged, not dropped."""
    a, _ = app
    await open_coup(a)
    await feed(a, card(2, "2H"))
    assert a.journal is not None
    real = a.journal.append
    full = True

    def append(inp: Any, emits: Any) -> Any:
        if full:
            raise JournalUnwritable("journal .../journal.sqlite: database or disk is full (test)")
        return real(inp, emits)

    monkeypatch.setattr(a.journal, "append", append)
    restart = DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN1", "s2")
    await feed(a, restart, Heartbeat(SHOE, 1), card(2, "3D"))
    assert a.machine is not None and a.machine.session(SHOE) == "s1"
    full = False
    await feed(a, restart)  # the device resends what no AK covered, the identity frame first
    assert a.machine is not None and a.machine.session(SHOE) == "s2"
    assert a.last_ack[SHOE] == 2
    assert cards_journaled(a) == [(2, "2H"), (2, "3D")]
    assert equals_replay(a)
