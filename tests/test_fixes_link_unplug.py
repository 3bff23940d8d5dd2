"""Unplugging a device while the host writes to it (the shoe side of a real pty closed, then an ``AK``
written): one structured ``link.lost`` line and a clean reconnect, never an asyncio traceback ("Fatal
write error on serial transport", "Exception in callback", "Task exception was never retrieved")."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest
import structlog
from link_support import expected_cards, running, running_link, wait_until
from structlog.testing import capture_logs

from tablesense.drivers.events import LinkState
from tablesense.drivers.transports.base import LinkLost
from tablesense.drivers.transports.serial import open_serial
from tablesense.simulators.exposure import PtyExposure
from tablesense.simulators.runner import SimulatorRunner, shoe_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()  # "Task exception was never retrieved" is logged when the task is collected
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.WARNING or r.exc_info is not None]


async def test_a_write_into_an_unplugged_pty_raises_link_lost_quietly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    exposure = PtyExposure(directory=str(tmp_path))
    await exposure.start()
    port = await open_serial(exposure.address, baud=115200)
    try:
        await exposure.write(b"$HB,1*00\r\n")
        assert await port.read()
        await exposure.unplug()  # closes the pty master: the next write fails with EIO
        with pytest.raises(LinkLost) as info:
            await port.write(b"$AK,1*00\r\n")
        assert "disconnected" in info.value.cause
        with pytest.raises(LinkLost):
            await port.read()
    finally:
        await port.close()
    assert _tracebacks(caplog) == []


async def test_unplug_mid_write_is_one_log_line_and_a_clean_reconnect(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    shoe = VirtualShoe(decks=8, seed=3)
    exposure = PtyExposure(directory=str(tmp_path))
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=3, loop_shoes=False), pace=0.02,
                             start_on_host=True, heartbeat=None)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: exposure.plugged, "pty created")
            async with running_link(exposure.address, auto_ack=True) as rec:
                await wait_until(lambda: len(rec.cards) >= 2, "two cards")
                await runner.unplug()
                await rec.link.ack(rec.cards[-1].seq)  # the host writes into the pty just unplugged
                await wait_until(lambda: rec.link.state is LinkState.DISCONNECTED, "the loss noticed")
                await runner.replug()
                await wait_until(lambda: runner.finished.is_set(), "three rounds dealt")
                await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)),
                                 "every card received")
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.link.connects == 2
    lost = [e for e in logs if e["event"] == "link.lost"]
    assert len(lost) == 1 and lost[0]["log_level"] == "warning" and "disconnected" in lost[0]["cause"]
    assert [e for e in logs if e["log_level"] in ("error", "critical") or "exc_info" in e] == []
    assert _tracebacks(caplog) == []
