"""``socket://`` links (serial device servers in raw TCP mode) against the TCP simulator, incl. restarts."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from link_support import expected_cards, running, running_link, wait_until
from structlog.testing import capture_logs

from tablesense.drivers.events import CardDrawn, DeviceIdentity, LinkState
from tablesense.drivers.transports import OpenError, open_transport
from tablesense.simulators.exposure import TcpExposure
from tablesense.simulators.runner import SimulatorRunner, shoe_program
from tablesense.simulators.shoe import VirtualShoe

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _plain_structlog() -> None:
    structlog.reset_defaults()


async def test_round_over_socket_url() -> None:
    shoe = VirtualShoe(decks=8, seed=21)
    exposure = TcpExposure()
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=2, loop_shoes=False), pace=0.005,
                             start_on_host=True)
    async with running(runner.run()):
        await wait_until(lambda: exposure.plugged, "listening")
        assert exposure.address.startswith("socket://127.0.0.1:")
        async with running_link(exposure.address) as rec:
            await wait_until(lambda: runner.finished.is_set(), "two rounds")
            await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.of(DeviceIdentity)
    assert rec.states[1].detail.startswith("tcp 127.0.0.1:")


async def test_server_restart_mid_round_loses_and_doubles_nothing() -> None:
    shoe = VirtualShoe(decks=8, seed=22)
    exposure = TcpExposure()
    runner = SimulatorRunner(shoe, exposure, shoe_program(shoe, rounds=3, loop_shoes=False), pace=0.02,
                             start_on_host=True, heartbeat=None)
    with capture_logs() as logs:
        async with running(runner.run()):
            await wait_until(lambda: exposure.plugged, "listening")
            port = exposure.port
            async with running_link(exposure.address) as rec:
                await wait_until(lambda: sum(isinstance(e, CardDrawn) for e in shoe.history) >= 3,
                                 "three cards dealt")
                await runner.unplug()  # device server goes away: connection closed, port refused
                await wait_until(lambda: rec.link.open_failures >= 2, "reconnect attempts refused")
                assert "refused" in rec.link.detail
                await runner.replug()
                assert exposure.port == port
                await wait_until(lambda: runner.finished.is_set(), "three rounds")
                await wait_until(lambda: len(rec.cards) >= len(expected_cards(shoe.history)), "every card")
    assert [(c.seq, c.card) for c in rec.cards] == [(c.seq, c.card) for c in expected_cards(shoe.history)]
    assert rec.link.connects == 2 and exposure.clients == 2
    assert rec.link.stats.duplicates >= 1
    assert len([e for e in logs if e["event"] == "link.lost"]) == 1
    assert [s.state for s in rec.states].count(LinkState.ONLINE) == 2


async def test_refused_connection_is_one_clear_open_error() -> None:
    exposure = TcpExposure()
    await exposure.start()
    url = exposure.address
    await exposure.close()  # nobody listens on that port now
    with pytest.raises(OpenError) as info:
        await open_transport(url)
    assert info.value.kind == "refused" and "refused" in str(info.value) and url in str(info.value)


async def test_bad_socket_url_is_reported() -> None:
    with pytest.raises(OpenError) as info:
        await open_transport("socket://localhost")
    assert info.value.kind == "bad_url"


async def test_half_open_connection_is_reopened_after_staying_stale() -> None:
    """A device server that accepts but never sends (half-open link): STALE, then closed and reopened."""
    accepted = 0
    held: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        held.append(writer)  # keep the connection open and say nothing

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with capture_logs() as logs:
            url = f"socket://127.0.0.1:{port}"
            async with running_link(url, stale_after=0.2, stale_reconnect=0.3) as rec:
                await wait_until(lambda: accepted >= 2, "a second connection after the stale timeout")
        states = [s.state for s in rec.states]
        assert states[:3] == [LinkState.CONNECTING, LinkState.ONLINE, LinkState.STALE]
        assert LinkState.DISCONNECTED in states[3:]
        lost = [e for e in logs if e["event"] == "link.lost"]
        assert lost and "stale" in lost[0]["cause"]
        assert rec.link.connects >= 2
    finally:
        for w in held:
            w.close()
        server.close()
