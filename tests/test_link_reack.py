"""docs/protocol.md §3: when a duplicate arrives, the host sends ``AK`` again for the last sequence number it
accepted (the earlier ``AK`` was probably lost). Over a real pseudo-terminal, so pyserial itself runs; the
test plays the device on the pty's master side."""

from __future__ import annotations

import os

from link_support import running_link, wait_until

from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import CardDrawn
from tablesense.drivers.protocols.tsref import Ack, HostDecoder, encode


class PtyDevice:
    """The device end of a pty: writes frames, decodes what the host sends back."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self._decoder = HostDecoder()
        self.acks: list[int] = []

    def send(self, seq: int, card: str) -> None:
        os.write(self.master, encode(CardDrawn("shoe", seq, Card.parse(card))))

    def poll(self) -> list[int]:
        try:
            data = os.read(self.master, 4096)
        except (BlockingIOError, OSError):
            return self.acks
        self.acks += [m.seq for m in self._decoder.feed(data) if isinstance(m, Ack)]
        return self.acks

    def close(self) -> None:
        os.close(self.slave)
        os.close(self.master)


async def test_a_duplicate_frame_is_answered_with_the_last_acknowledged_number() -> None:
    dev = PtyDevice()
    try:
        async with running_link(dev.path, status_on_connect=False) as rec:
            await wait_until(lambda: rec.link.state.value == "online", "link online")
            for seq, card in ((0, "QH"), (1, "QS"), (2, "3D")):
                dev.send(seq, card)
            await wait_until(lambda: len(rec.cards) == 3, "three cards queued")
            await rec.link.ack(2)  # the daemon acknowledges once the events are journaled
            await wait_until(lambda: dev.poll() == [2], "AK 2")
            dev.send(3, "8C")  # decoded, queued, not yet acknowledged (not journaled yet)
            await wait_until(lambda: len(rec.cards) == 4, "fourth card queued")
            dev.send(2, "3D")  # the device did not get AK 2 and resends frame 2
            await wait_until(lambda: dev.poll() == [2, 2], "AK 2 re-sent for the duplicate")
            dev.send(3, "8C")  # a resend of a frame not yet acknowledged: delivered again, never AK 3
            await wait_until(lambda: len(rec.cards) == 5, "the resend of frame 3 delivered again")
            assert dev.poll() == [2, 2]
            await rec.link.ack(3)
            await wait_until(lambda: dev.poll() == [2, 2, 3], "AK 3")
            dev.send(3, "8C")  # now acknowledged: a duplicate, answered AK 3
            await wait_until(lambda: dev.poll() == [2, 2, 3, 3], "AK 3 re-sent")
        # acknowledged frames are never doubled; the one resent before its acknowledgement is delivered
        # again, because its journaling may have failed (the daemon drops it by content if it did not)
        assert [c.seq for c in rec.cards] == [0, 1, 2, 3, 3]
        assert rec.link.stats.duplicates == 2 and rec.link.stats.resent == 1 and rec.link.reacks == 2
    finally:
        dev.close()


async def test_a_frame_resent_after_a_failed_journal_write_is_taken_again() -> None:
    """Defect: the codec recorded a frame's number when it decoded it, so after its journaling failed
    (no AK) the device's resend was dropped as a duplicate and the card was recorded nowhere."""
    dev = PtyDevice()
    try:
        async with running_link(dev.path, status_on_connect=False) as rec:
            await wait_until(lambda: rec.link.state.value == "online", "link online")
            dev.send(0, "QH")
            await wait_until(lambda: len(rec.cards) == 1, "card 0")
            await rec.link.ack(0)
            dev.send(1, "7D")  # decoded; the daemon's journal write fails: no AK
            await wait_until(lambda: len(rec.cards) == 2, "card 1")
            dev.send(1, "7D")  # no AK came: the device resends it
            await wait_until(lambda: len(rec.cards) == 3, "card 1 delivered again")
            await rec.link.ack(1)
            await wait_until(lambda: dev.poll() == [0, 1], "AK 0 and AK 1")
        assert [(c.seq, str(c.card)) for c in rec.cards] == [(0, "QH"), (1, "7D"), (1, "7D")]
        assert rec.link.stats.duplicates == 0 and rec.link.stats.seq_gaps == 0
    finally:
        dev.close()


async def test_no_acknowledgement_is_invented_before_the_first() -> None:
    """A duplicate before the host acknowledged anything gets no AK (nothing is journaled yet)."""
    dev = PtyDevice()
    try:
        async with running_link(dev.path, status_on_connect=False) as rec:
            await wait_until(lambda: rec.link.state.value == "online", "link online")
            dev.send(0, "QH")
            dev.send(0, "QH")
            dev.send(1, "QS")
            await wait_until(lambda: len(rec.cards) == 2 and rec.link.stats.duplicates == 1, "frames read")
            await rec.link.ack(1)
            await wait_until(lambda: dev.poll() == [1], "AK 1")
        assert rec.link.reacks == 0
    finally:
        dev.close()
