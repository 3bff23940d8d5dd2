"""Simulated devices resend what no acknowledgement covers (docs/protocol.md §3), as ``tablesense simulate
shoe|pads`` runs them: after 1 s without an ``AK``, and before answering a status request (a restarted
host). Defect: the simulators never resent an unacknowledged frame, so a daemon crash lost the frames in
flight and ``simulate table`` gave up. Over TCP, the test playing the host."""

from __future__ import annotations

import asyncio

import pytest
from link_support import running, wait_until

from tablesense.drivers.events import CardDrawn, DeviceIdentity
from tablesense.drivers.protocols.tsref import TsrefCodec, encode_ack, encode_status_request
from tablesense.simulators.exposure import TcpExposure
from tablesense.simulators.runner import SimulatorRunner, script_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = pytest.mark.timeout(60)


class Host:
    """The host end of the TCP link: decodes every frame, resends included (no duplicate memory)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.events: list[object] = []

    async def pump(self) -> None:
        codec = TsrefCodec("shoe")
        while data := await self.reader.read(4096):
            events = codec.feed(data)
            codec._recent.clear()  # see every resend
            self.events.extend(events)

    def cards(self) -> list[tuple[int, str]]:
        return [(e.seq, str(e.card)) for e in self.events if isinstance(e, CardDrawn)]


async def test_unacknowledged_frames_are_resent_until_an_ack_covers_them() -> None:
    shoe = VirtualShoe(1, cards=["QH", "9D", "3C"], session="s-1")
    exposure = TcpExposure()
    runner = SimulatorRunner(shoe, exposure, script_program(shoe), pace=0.01, heartbeat=None,
                             start_on_host=True, resend_after=0.3)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged and bool(exposure.address), "listening")
        host_name, port = exposure.address.removeprefix("socket://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host_name, int(port))
        host = Host(reader, writer)
        async with running(host.pump()):
            await wait_until(lambda: len(host.cards()) == 3, "three cards")
            ident = next(e for e in host.events if isinstance(e, DeviceIdentity))
            assert ident.session == "s-1" and ident.seq == 0
            writer.write(encode_ack(2))  # the host journaled up to frame 2 (identity, new shoe, QH)
            await writer.drain()
            await wait_until(lambda: len(host.cards()) >= 5, "the unacknowledged 9D and 3C resent")
            assert runner.resent >= 3  # with the empty-shoe frame after them
            assert host.cards()[3:5] == [(3, "9D"), (4, "3C")]  # unchanged: same number, same card
            writer.write(encode_ack(5))  # ... and the empty-shoe frame after the last card
            await writer.drain()
            await wait_until(lambda: runner.acked(5), "everything acknowledged")
            seen = len(host.events)
            await asyncio.sleep(0.8)
            assert len(host.events) == seen  # nothing left to resend
            writer.write(encode_status_request())  # a restarted host: nothing unacknowledged, answer only
            await writer.drain()
            await wait_until(lambda: len(host.events) > seen, "the status answer")
            assert not [e for e in host.events[seen:] if isinstance(e, CardDrawn)]
        writer.close()


async def test_a_host_that_never_acknowledges_gets_no_resends() -> None:
    """``tablesense capture`` only listens: the device must not repeat itself to it."""
    shoe = VirtualShoe(1, cards=["QH", "9D"], session="s-2")
    exposure = TcpExposure()
    runner = SimulatorRunner(shoe, exposure, script_program(shoe), pace=0.01, heartbeat=None,
                             start_on_host=True, resend_after=0.2)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged and bool(exposure.address), "listening")
        host_name, port = exposure.address.removeprefix("socket://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host_name, int(port))
        host = Host(reader, writer)
        async with running(host.pump()):
            await wait_until(lambda: len(host.cards()) == 2, "two cards")
            await asyncio.sleep(0.8)
            assert runner.resent == 0 and len(host.cards()) == 2
        writer.close()


async def test_a_power_cycle_starts_a_new_session_numbered_from_zero() -> None:
    shoe = VirtualShoe(1, cards=["QH", "9D"], session="boot-1")
    exposure = TcpExposure()
    runner = SimulatorRunner(shoe, exposure, script_program(shoe), pace=0.01, heartbeat=None,
                             start_on_host=True, resend_after=None)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged and bool(exposure.address), "listening")
        host_name, port = exposure.address.removeprefix("socket://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host_name, int(port))
        host = Host(reader, writer)
        async with running(host.pump()):
            await wait_until(lambda: len(host.cards()) == 2, "two cards")
            await runner.power_cycle("boot-2")
            await wait_until(lambda: isinstance(host.events[-1], DeviceIdentity), "the power-up identity")
            last = host.events[-1]
            assert isinstance(last, DeviceIdentity) and (last.seq, last.session) == (0, "boot-2")
            assert shoe.boots == 2 and shoe.next_seq == 1
        writer.close()
