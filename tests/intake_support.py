"""Helpers for the intake tests at the edges of the sequence rules (docs/protocol.md §3-§5): the real
intake (``App``) with a real journal and no broker (``App.open`` builds the relay without connecting;
acknowledgements are read from ``App.last_ack``, what the links would send), a clock the test moves."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from machine_support import PADS, SHOE, baccarat_config

from tablesense.daemon.app import RESEND_WAIT, App, now_iso
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.table.inputs import Command, TimedInput
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceEvent,
    DeviceIdentity,
    DeviceState,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def opened_app(tmp_path: Path) -> AsyncIterator[tuple[App, Clock]]:
    """An opened baccarat ``App`` journaling under ``tmp_path`` and its clock (closed after)."""
    clock = Clock()
    a = App(baccarat_config(extra=f'\n[journal]\ndirectory = "{tmp_path / "journal"}"\n'), clock=clock)
    a.open()
    yield a, clock
    if a.journal is not None:
        a.journal.close()


def card(seq: int, text: str) -> CardDrawn:
    return CardDrawn(SHOE, seq, Card.parse(text))


def outbox(a: App, channel: str) -> list[dict[str, Any]]:
    assert a.journal is not None
    return [json.loads(row.payload) for row in a.journal.pending(limit=100000) if row.channel == channel]


def raised(a: App) -> list[tuple[str, bool]]:
    """The alarms raised, in order: (code, held)."""
    return [(b["code"], b["held"]) for b in outbox(a, "alarms") if b["state"] == "raised"]


def public_round(a: App) -> dict[str, Any]:
    return outbox(a, "round")[-1]


def cards_journaled(a: App) -> list[tuple[int, str]]:
    assert a.journal is not None
    return [(inp.event.seq, str(inp.event.card)) for inp in a.journal.replay_inputs()
            if isinstance(inp.event, CardDrawn)]


def equals_replay(a: App) -> bool:
    assert a.machine is not None
    return bool(a.machine.snapshot() == a._rebuilt_machine().snapshot())


async def feed(a: App, *events: DeviceEvent | DeviceState) -> list[int | None]:
    """Process ``events`` in order; the shoe's acknowledgement after each."""
    acks = []
    for ev in events:
        await a._process_device(ev)
        acks.append(a.last_ack.get(SHOE))
    return acks


async def release(a: App, clock: Clock) -> None:
    """No resend came within :data:`RESEND_WAIT`: the host applies what it held back."""
    clock.now += RESEND_WAIT + 0.1
    await a._timer_step()


_command_ids = itertools.count(1)


async def command(a: App, name: str, **args: object) -> None:
    """A supervisor's command applied and journaled as the MQTT command path does; it must succeed."""
    async with a._commit_lock:
        assert a.machine is not None
        inp = TimedInput(ts=now_iso(), event=Command(name, {k: str(v) for k, v in args.items()}, "sup",
                                                     command_id=f"sup-{next(_command_ids)}"))
        reply, emits = a.machine.handle_command(inp)
        assert reply.ok, reply
        await a._journal(inp, emits)


async def open_coup(a: App) -> None:
    """Shoe (session ``s1``) and pads announced, a new shoe, 1P and 1B bet, no more bets."""
    await feed(a, DeviceIdentity(SHOE, 0, "acme", "CS-8", "2.4.1", "SN1", "s1"),
               ShoeStatus(SHOE, 1, ShoeStatusKind.NEW_SHOE),
               DeviceIdentity(PADS, 0, "acme", "BP-2", "1.0", "SN2", "p1"),
               SpotChanged(PADS, 1, "1P", SpotState.PLACED, 1000),
               SpotChanged(PADS, 2, "1B", SpotState.PLACED, 1000),
               DealerButton(PADS, 3, Button.NO_MORE_BETS))
