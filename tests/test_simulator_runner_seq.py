"""Standalone simulated pads (``tablesense simulate pads``): heartbeats between a round's phases never
put the wire out of sequence order (a host would raise SEQUENCE_GAP every second otherwise)."""

from __future__ import annotations

import asyncio
import random

import pytest
from link_support import running, wait_until

from tablesense.drivers.events import DealerButton, Heartbeat, SpotChanged
from tablesense.drivers.protocols.tsref import TsrefCodec
from tablesense.simulators.exposure import TcpExposure
from tablesense.simulators.pads import VirtualPads
from tablesense.simulators.runner import SimulatorRunner, pads_program

pytestmark = pytest.mark.timeout(60)


async def test_heartbeats_between_pad_phases_keep_the_sequence_in_order() -> None:
    pads = VirtualPads(["1P", "1B", "1PP", "2B"])
    exposure = TcpExposure()
    # A heartbeat after 5 ms of quiet, phases 2 * 10 ms apart: heartbeats fall between the phases.
    runner = SimulatorRunner(pads, exposure, pads_program(pads, random.Random(3), rounds=4), pace=0.01,
                             heartbeat=0.005, start_on_host=True)
    codec = TsrefCodec("pads")
    events: list[object] = []
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged and bool(exposure.address), "listening")
        host, port = exposure.address.removeprefix("socket://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            target: int | None = None
            while target is None or len(events) < target:
                data = await asyncio.wait_for(reader.read(4096), 10)
                events.extend(codec.feed(data))
                if target is None and runner.finished.is_set():
                    target = len(pads.history)  # everything sent so far, heartbeats included
        finally:
            writer.close()
    assert runner.finished.is_set()
    buttons = [e for e in events if isinstance(e, DealerButton)]
    assert len(buttons) == 8  # four rounds: no more bets and round end each
    assert any(isinstance(e, SpotChanged) for e in events)
    beats = [i for i, e in enumerate(events) if isinstance(e, Heartbeat)]
    first, last = events.index(buttons[0]), events.index(buttons[-1])
    assert any(first < i < last for i in beats), "no heartbeat fell inside the rounds: test proves nothing"
    assert codec.take_gaps() == []
    seqs = [e.seq for e in events]  # type: ignore[attr-defined]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
