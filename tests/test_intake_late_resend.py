"""A resend that comes after the host stopped waiting for it (docs/protocol.md §3, §5 step 4) is a late
arrival: journaled, never applied as a new card, never moving the device's number or its acknowledgement
back, never making the next in-order frames look like gaps. The real intake (``App``) and journal, no
broker (see ``intake_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from intake_support import (
    Clock,
    card,
    cards_journaled,
    command,
    equals_replay,
    feed,
    open_coup,
    opened_app,
    outbox,
    public_round,
    raised,
    release,
)
from machine_support import SHOE

from tablesense.daemon.app import App
from tablesense.drivers.events import DeviceState, LinkState


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[App, Clock]]:
    async for pair in opened_app(tmp_path):
        yield pair


async def test_a_resend_after_the_wait_is_a_late_arrival_not_a_new_card(app: tuple[App, Clock]) -> None:
    """Card frame 4 is corrupted (its resends too) and 5 comes; the host applies 5 with the gap; the
    resend of 4 comes just after. It is journaled, not applied: one holding gap (3 then 5) and a
    non-holding note of the late frame, no gap "5 then 4", the in-order 6 and 7 are taken at once, and
    the acknowledgement never goes back."""
    a, clock = app
    await open_coup(a)
    acks = await feed(a, card(2, "2H"), card(3, "3D"), card(5, "4S"))
    await release(a, clock)
    acks.append(a.last_ack.get(SHOE))
    acks += await feed(a, card(4, "2C"), card(6, "5C"), card(7, "6C"))
    assert a._waits == {}  # 6 and 7 were not held back as if 5 were missing
    assert [x for x in acks if x is not None] == sorted(x for x in acks if x is not None)
    assert acks[-1] == 7
    gaps = [b for b in outbox(a, "alarms") if b["code"] == "SEQUENCE_GAP" and b["state"] == "raised"]
    assert [b["held"] for b in gaps] == [True, False]
    assert "3 then 5" in gaps[0]["text"] and "numbered 4 came late" in gaps[1]["text"]
    assert (4, "2C") in cards_journaled(a)  # on record
    assert a.machine is not None and a.machine.last_seq(SHOE) == 7
    assert equals_replay(a)


async def test_a_late_resend_of_a_card_the_supervisor_entered_is_not_counted_again(
        app: tuple[App, Clock]) -> None:
    """Card frame 3 (3D) is lost and 4 (2C) comes while the shoe's cable is out; the host applies 4 with
    the gap; the supervisor enters 3D and the set-aside 2C and acknowledges. The shoe, back, resends 3
    and 4 and deals 5 (4S): 3D is not taken from the shoe a second time, no new holding alarm, 4S is
    placed (physically 2H 3D 2C 4S are out: 416 - 4)."""
    a, clock = app
    await open_coup(a)
    await feed(a, card(2, "2H"), card(4, "2C"), DeviceState(SHOE, LinkState.DISCONNECTED, "cable out"))
    await release(a, clock)
    gap = [b for b in outbox(a, "alarms") if b["code"] == "SEQUENCE_GAP"][-1]["alarm_id"]
    await command(a, "enter_card", shoe=1, round=1, card="3D")
    await command(a, "enter_card", shoe=1, round=1, card="2C")
    await command(a, "ack_alarm", alarm_id=gap)
    assert public_round(a)["cards_remaining"] == 413
    holds_before = [c for c, held in raised(a) if held]
    acks = await feed(a, DeviceState(SHOE, LinkState.ONLINE, "back"), card(3, "3D"), card(4, "2C"),
                      card(5, "4S"))
    await release(a, clock)
    rnd = public_round(a)
    assert [c["card"] for c in rnd["cards"]] == ["2H", "3D", "2C", "4S"]
    assert rnd["cards_remaining"] == 412
    assert not rnd["held"]
    assert [c for c, held in raised(a) if held] == holds_before  # nothing new holds
    assert acks[1:] == [4, 4, 5]
    assert equals_replay(a)
