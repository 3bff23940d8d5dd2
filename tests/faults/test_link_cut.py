"""Scenario 2: the TCP link between the daemon and the broker cut and restored through a loopback
proxy, silently (no FIN, no RST: bytes are simply dropped), so the broker does not notice at once.

Two cuts while rounds are being dealt: a short one, restored before either side notices (what the daemon
wrote into the dead link is lost; the broker still holds the old connection when the daemon comes back
and takes its session over), and a long one that the daemon detects itself (publish acknowledgement
timeout / keepalive), with reconnects black-holed until the link is restored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tablesense.daemon.broker import mosquitto_binary

from .harness import Dealer, Rig, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


def broker_log(rig: Rig) -> str:
    return rig.broker.log.read_text(errors="replace") if rig.broker.log.exists() else ""


def takeovers(rig: Rig) -> int:
    return broker_log(rig).count("already connected, closing old connection")


async def test_link_cut_silently_and_restored(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=202, via_proxy=True, keepalive=5)
    proxy = rig.proxy
    assert proxy is not None
    dealer = Dealer(rig.sim, gap=0.05).start()
    await dealer.wait_rounds(5, 60)

    # Cut 1: short, restored before anyone notices.
    proxy.cut()
    n = len(rig.sim.rounds)
    await dealer.wait_rounds(n + 2, 60)  # rounds settled while the link silently eats the messages
    timeouts_before = broker_log(rig).count("exceeded timeout")
    connected = rig.daemon.events("mqtt_connected")
    proxy.restore()
    await wait_until(lambda: rig.daemon.events("mqtt_connected") > connected, 60, "the daemon to reconnect")
    # The broker had not noticed: it learns of the dead connection only when the daemon takes it over.
    await wait_until(lambda: takeovers(rig) >= 1, 30, "the broker to see the session taken over")
    await dealer.wait_rounds(len(rig.sim.rounds) + 3, 60)

    # Cut 2: long enough for the daemon to notice by itself; its reconnects go into the void too.
    disconnected = rig.daemon.events("mqtt_disconnected") + rig.daemon.events("mqtt_connect_failed")
    proxy.cut()
    await wait_until(lambda: rig.daemon.events("mqtt_disconnected") + rig.daemon.events("mqtt_connect_failed")
                     > disconnected, 60, "the daemon to notice the dead link")
    connected = rig.daemon.events("mqtt_connected")
    proxy.restore()
    await wait_until(lambda: rig.daemon.events("mqtt_connected") > connected, 60, "the daemon to reconnect")
    await dealer.wait_rounds(len(rig.sim.rounds) + 3, 60)
    await dealer.stop()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.verify("tcp_link_cut", extra={
        "bytes_dropped_by_proxy": proxy.dropped_bytes, "proxy_connections": proxy.connections,
        "broker_keepalive_timeouts_before_restore": timeouts_before,
        "broker_session_takeovers": takeovers(rig)})
    assert proxy.dropped_bytes > 0  # the cuts really swallowed traffic
