"""End to end over real pseudo-terminals (``tablesense run`` as a subprocess, a Mosquitto the test owns): a
shoe that keeps no frames to resend (acknowledging is optional, docs/protocol.md §3) is at sequence 99998
between coups when its cable blips; frame 99999, the next coup's first card, is lost on the line; the shoe
deals on with 00000, 00001, ... across the wrap. 99998 then 00000 is a gap of one frame (§4, §5): the coup
is held by ``SEQUENCE_GAP``, never settled from cards shifted one place (docs/state-machine.md, "Holds")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import Daemon, Recorder

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.config import parse_config
from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import (
    Button,
    CardDrawn,
    DealerButton,
    DeviceEvent,
    DeviceIdentity,
    Heartbeat,
    ShoeStatus,
    ShoeStatusKind,
    SpotChanged,
    SpotState,
)
from tablesense.drivers.protocols.tsref import Ack, HostDecoder, StatusRequest, encode
from tablesense.simulators.dealer import sim_config_toml
from tablesense.simulators.exposure import PtyExposure

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]

BOUND = 30.0  # seconds: an upper bound for what should take well under one, never a timing assertion


class RawDevice:
    """A device on a pty whose frames the test writes one by one (numbers chosen by the test); it records
    the host's ``AK`` and ``SQ`` and resends nothing."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.exposure = PtyExposure(name, directory)
        self.acks: list[int] = []
        self.status_requests = 0
        self._decoder = HostDecoder()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.exposure.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            data = await self.exposure.from_host.get()
            for message in self._decoder.feed(data):
                if isinstance(message, Ack):
                    self.acks.append(message.seq)
                elif isinstance(message, StatusRequest):
                    self.status_requests += 1

    async def send(self, event: DeviceEvent) -> None:
        await self.exposure.write(encode(event))

    async def sent_acked(self, event: DeviceEvent) -> None:
        """Send ``event`` and wait until an ``AK`` names its number."""
        await self.send(event)
        await until(lambda: event.seq in self.acks, f"{self.name}: AK {event.seq}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.exposure.close()


async def until(cond: Any, what: str) -> None:
    async with asyncio.timeout(BOUND):
        while not cond():
            await asyncio.sleep(0.02)
    assert cond(), what


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    b = MosquittoBroker(tmp_path / "broker", persistence=False)
    b.start()
    yield b
    b.stop()


@pytest.fixture
async def table(broker: MosquittoBroker, tmp_path: Path) -> AsyncIterator[tuple[RawDevice, RawDevice,
                                                                                Recorder]]:
    dev = tmp_path / "dev"
    dev.mkdir()
    shoe, pads = RawDevice("shoe", dev), RawDevice("pads", dev)
    await shoe.start()
    await pads.start()
    text = sim_config_toml("baccarat", urls={"shoe": str(dev / "shoe"), "pads": str(dev / "pads")},
                           host=broker.host, port=broker.port, journal=tmp_path / "journal", table="wrap1")
    (tmp_path / "table.toml").write_text(text)
    table = parse_config(text).table
    rec = Recorder(broker, f"tablesense/{table}/#", f"rec-{tmp_path.name}")
    await rec.start()
    daemon = Daemon(tmp_path / "table.toml", tmp_path / "daemon.log")
    daemon.start()
    try:
        await until(lambda: shoe.status_requests and pads.status_requests, "the daemon opened both devices")
        yield shoe, pads, rec
    finally:
        daemon.kill()
        await rec.stop()
        await shoe.close()
        await pads.close()


def card(seq: int, text: str) -> CardDrawn:
    return CardDrawn("shoe", seq, Card.parse(text))


async def test_a_card_lost_at_the_wrap_after_a_cable_blip_holds_the_coup(
        table: tuple[RawDevice, RawDevice, Recorder]) -> None:
    shoe, pads, rec = table
    await shoe.sent_acked(DeviceIdentity("shoe", 99990, "acme", "CS-8", "2.4.1", "SN1", "boot1"))
    await pads.sent_acked(DeviceIdentity("pads", 0, "acme", "BP-2", "1.0", "SN2", "pboot1"))
    await shoe.sent_acked(ShoeStatus("shoe", 99991, ShoeStatusKind.NEW_SHOE))
    await shoe.sent_acked(ShoeStatus("shoe", 99992, ShoeStatusKind.BURN, Card.parse("5H")))
    await pads.sent_acked(SpotChanged("pads", 1, "1P", SpotState.PLACED, 1000))
    await pads.sent_acked(SpotChanged("pads", 2, "1B", SpotState.PLACED, 1000))
    for seq, text in zip(range(99993, 99997), ["4H", "KS", "4D", "7C"], strict=True):  # coup 1: P 8, B 7
        await shoe.sent_acked(card(seq, text))
    await until(lambda: len(rec.on("results")) == 1, "coup 1 settled")
    await pads.sent_acked(DealerButton("pads", 3, Button.ROUND_END))  # betting open for coup 2
    await pads.sent_acked(SpotChanged("pads", 4, "1B", SpotState.PLACED, 2000))
    await shoe.sent_acked(Heartbeat("shoe", 99997))
    await shoe.sent_acked(Heartbeat("shoe", 99998))

    asked = shoe.status_requests
    await shoe.exposure.unplug()  # the cable blips
    await until(lambda: any(r.body.get("state") == "disconnected" for r in rec.on("shoe")),
                "the daemon saw the shoe disconnected")
    await shoe.exposure.replug()
    await until(lambda: shoe.status_requests > asked, "the daemon reopened the shoe")
    # frame 99999 (9H, coup 2's first card) is lost on the line; the shoe deals on across the wrap
    for seq, text in enumerate(["3D", "2C", "4S", "5C"]):
        await shoe.send(card(seq, text))

    def gap_or_result() -> bool:
        return (any(r.body["code"] == "SEQUENCE_GAP" for r in rec.on("alarms"))
                or len(rec.on("results")) > 1)

    await until(gap_or_result, "coup 2 held by a sequence gap, or settled")
    gaps = [r.body for r in rec.on("alarms") if r.body["code"] == "SEQUENCE_GAP"]
    assert gaps and gaps[0]["held"] and "99998 then 0" in gaps[0]["text"]
    assert len(rec.on("results")) == 1
    assert [r.body for r in rec.on("settlements") if r.body["round"] == 2] == []
