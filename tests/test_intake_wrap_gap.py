"""A frame lost at the sequence wrap 99999 -> 00000 after a link blip is a gap, never taken for a device
restart (docs/protocol.md §4, §5; docs/state-machine.md "Alarms", SEQUENCE_GAP): else the coup's first
card is missed without an alarm, the cards shift hands and the coup settles from the wrong cards. The
real intake (``App``) and journal, no broker (see ``intake_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from intake_support import Clock, card, equals_replay, feed, opened_app, outbox, public_round, raised, release
from machine_support import PADS, SHOE

from tablesense.daemon.app import App
from tablesense.drivers.events import (
    DeviceIdentity,
    DeviceState,
    Heartbeat,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[App, Clock]]:
    async for pair in opened_app(tmp_path):
        yield pair


async def wrap_coup(a: App, clock: Clock, session: str, lost: int) -> None:
    """A shoe (identity ``session``; "" a version 1 device) at 99998 between coups, betting open; its
    link blips; the next ``lost`` frames (the coup's first cards) are lost on the line; it deals on
    across the wrap and never resends."""
    seq = 99995
    await feed(a, DeviceIdentity(SHOE, seq, "acme", "CS-8", "2.4.1", "SN1", session),
               ShoeStatus(SHOE, seq + 1, ShoeStatusKind.NEW_SHOE),
               DeviceIdentity(PADS, 0, "acme", "BP-2", "1.0", "SN2", "p1"),
               SpotChanged(PADS, 1, "1P", SpotState.PLACED, 1000),
               SpotChanged(PADS, 2, "1B", SpotState.PLACED, 1000),
               Heartbeat(SHOE, 99997), Heartbeat(SHOE, 99998),
               DeviceState(SHOE, LinkState.DISCONNECTED, "usb glitch"),
               DeviceState(SHOE, LinkState.ONLINE, "back"))
    seq = (99998 + 1 + lost) % 100000
    for text in ("3D", "2C", "4S", "5C", "6H", "7H")[:6 - lost]:
        await feed(a, card(seq, text))
        seq = (seq + 1) % 100000
    await release(a, clock)


@pytest.mark.parametrize("session", ["boot1", ""], ids=["version2", "version1"])
@pytest.mark.parametrize("lost", [1, 2], ids=["99998-then-0", "99998-then-1"])
async def test_a_frame_lost_at_the_wrap_after_a_link_blip_is_a_holding_gap(
        app: tuple[App, Clock], session: str, lost: int) -> None:
    """99998 then 00000 (or 00001) is a gap of one (two) frames across the wrap, never a restart: the
    coup's first card may be lost, so SEQUENCE_GAP holds and nothing is settled from shifted cards."""
    a, clock = app
    await wrap_coup(a, clock, session, lost)
    assert ("SEQUENCE_GAP", True) in raised(a)
    assert public_round(a)["held"]
    assert outbox(a, "results") == []
    assert outbox(a, "settlements") == []
    assert equals_replay(a)


async def test_a_version1_restart_far_from_the_wrap_is_still_no_gap(app: tuple[App, Clock]) -> None:
    """Control: a version 1 shoe (no session) at 500, disconnected between rounds, that comes back
    numbering from 0 restarted: no SEQUENCE_GAP (docs/state-machine.md, "Alarms")."""
    a, _ = app
    await feed(a, DeviceIdentity(SHOE, 498, "acme", "CS-8", "2.4.1", "SN1", ""),
               ShoeStatus(SHOE, 499, ShoeStatusKind.NEW_SHOE), Heartbeat(SHOE, 500),
               DeviceState(SHOE, LinkState.DISCONNECTED, "power"),
               DeviceState(SHOE, LinkState.ONLINE, "back"), Heartbeat(SHOE, 1))
    assert [c for c, _ in raised(a)] == ["DEVICE_LOST"]
    assert a.machine is not None and a.machine.last_seq(SHOE) == 1
