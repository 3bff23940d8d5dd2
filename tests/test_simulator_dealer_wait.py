"""The simulated dealer's wait for the daemon's acknowledgement, with this test as the host on the real
ptys (pyserial): it returns as soon as an ``AK`` covering the frame is read, and while it waits it calls
``on_wait`` every ``wait_notice`` seconds, also when the host keeps acknowledging only earlier frames."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
import serial

from tablesense.daemon.config import parse_config
from tablesense.drivers.protocols.tsref import TsrefCodec
from tablesense.simulators.dealer import SimTable, sim_config_toml

pytestmark = pytest.mark.timeout(60)


async def table(tmp_path: Path) -> SimTable:
    dev = tmp_path / "dev"
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host="127.0.0.1", port=1, journal=tmp_path / "journal")
    sim = SimTable(parse_config(text), dev, seed=3, heartbeat=None)
    await sim.start()
    return sim


def host_port(sim: SimTable) -> serial.Serial:
    return serial.serial_for_url(sim.urls["shoe"], baudrate=115200, timeout=0)


async def test_the_wait_ends_with_the_ak_that_covers_the_frame(tmp_path: Path) -> None:
    sim = await table(tmp_path)
    port = host_port(sim)
    try:
        frames = sim.shoe.identity() + sim.shoe.start_shoe()
        last = (sim.shoe.next_seq - 1) % 100_000
        waiting = asyncio.create_task(sim.shoe_frames(frames))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # nothing acknowledged yet
        port.write(TsrefCodec("shoe").ack(last - 1))  # an earlier frame: not enough
        await asyncio.sleep(0.2)
        assert not waiting.done()
        loop = asyncio.get_running_loop()
        acked_at = loop.time()
        port.write(TsrefCodec("shoe").ack(last))
        await asyncio.wait_for(waiting, 5)
        assert loop.time() - acked_at < 1.0  # woken by the AK itself (the device resends after 1 s)
    finally:
        port.close()
        await sim.close()


async def test_on_wait_is_called_at_its_interval_while_only_earlier_frames_are_acknowledged(
        tmp_path: Path) -> None:
    sim = await table(tmp_path)
    notices: list[tuple[str, int, float]] = []
    sim.on_wait = lambda device, seq, seconds: notices.append((device, seq, seconds))
    sim.wait_notice = 0.5
    sim.ack_timeout = None
    port = host_port(sim)
    try:
        first = sim.shoe.identity()
        port_task = asyncio.create_task(sim.shoe_frames(first + sim.shoe.start_shoe()))
        earliest = 0
        for _ in range(16):  # every 0.1 s an AK of the identity frame only: the wait goes on
            port.write(TsrefCodec("shoe").ack(earliest))
            await asyncio.sleep(0.1)
        assert not port_task.done()
        assert len(notices) >= 2, notices  # 1.6 s of waiting, a notice every 0.5 s
        assert all(device == "shoe" for device, _, _ in notices)
        waited = [seconds for _, _, seconds in notices]
        assert all(later > earlier for earlier, later in itertools.pairwise(waited)), waited
        assert waited[0] >= 0.45, waited
        port_task.cancel()
        await asyncio.gather(port_task, return_exceptions=True)
    finally:
        port.close()
        await sim.close()


async def test_a_long_wait_without_on_wait_sleeps(tmp_path: Path) -> None:
    """Without ``on_wait``, waiting past ``wait_notice`` still sleeps between acknowledgements (the
    process's CPU time stays far below the time waited)."""
    sim = await table(tmp_path)
    sim.wait_notice = 0.05
    sim.ack_timeout = 1.0
    try:
        cpu0 = time.process_time()
        with pytest.raises(TimeoutError):
            await sim.shoe_frames(sim.shoe.identity())  # nobody acknowledges
        assert time.process_time() - cpu0 < 0.5
    finally:
        await sim.close()
