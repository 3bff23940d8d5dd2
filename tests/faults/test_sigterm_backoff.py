"""Scenario 4: SIGTERM while the relay is backing off between reconnects (broker down).

The daemon must exit 0 within 5 s; once the broker is back the retained ``status`` must say ``offline``
(the daemon's will or an explicit publish), and the rounds settled while the broker was down must all be
delivered by the next start, with the same ``msg_id``s."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiomqtt
import pytest

from tablesense.daemon.broker import mosquitto_binary

from .harness import Dealer, Rig, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def retained_status(rig: Rig) -> dict[str, object]:
    """The retained status as a fresh (clean-session) client sees it."""
    async with aiomqtt.Client(rig.broker.host, rig.broker.port) as c:
        await c.subscribe(f"tablesense/{rig.config.table}/status", qos=1)
        async with asyncio.timeout(5):
            async for m in c.messages:
                assert m.retain
                body: dict[str, object] = json.loads(bytes(m.payload))  # type: ignore[arg-type,unused-ignore]
                return body
    raise AssertionError("no retained status")


async def test_sigterm_during_reconnect_backoff(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=404)
    for _ in range(3):
        await rig.sim.play_round()
    await rig.settled_through_journal()
    rig.broker.stop()
    for _ in range(3):  # settled and journaled with the broker down
        await rig.sim.play_round()
    failed_before = rig.daemon.events("mqtt_connect_failed")
    await wait_until(lambda: rig.daemon.events("mqtt_connect_failed") >= failed_before + 2, 30,
                     "the relay to fail reconnecting twice (it is backing off)")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await rig.daemon.terminate(timeout=5.0) == 0
    stop_seconds = round(loop.time() - t0, 2)
    assert rig.daemon.events("daemon_stopped") == 1

    rig.broker.start()
    status = await retained_status(rig)
    # Bring the daemon back so that what was journaled while the broker was down gets delivered.
    rig.restart_daemon()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.verify("sigterm_during_backoff", extra={"sigterm_exit_seconds": stop_seconds,
                                                "retained_status_after": status["state"]})
    assert status["state"] == "offline", f"retained status after SIGTERM during backoff: {status}"


def has_open(pid: int, path: Path) -> bool:
    """The process ``pid`` has ``path`` open (its /proc fd table)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


async def test_sigterm_during_startup_journal_replay(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """SIGTERM while a restarted daemon checks and replays a journal of some 80 rounds: exit 0."""
    rig = await rigs(seed=407)
    dealer = Dealer(rig.sim, max_rounds=80).start()
    await dealer.wait_rounds(80, 120)
    await dealer.stop()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    rig.restart_daemon()
    assert rig.daemon.proc is not None
    pid, db = rig.daemon.proc.pid, rig.journal_dir / "journal.sqlite"
    await wait_until(lambda: has_open(pid, db) or not rig.daemon.running, 30, "the journal opened",
                     step=0.001)
    rc = await rig.daemon.terminate(timeout=5.0)
    text = rig.daemon.text().split('"event":"daemon_stopped"')[-1]
    assert '"event":"daemon_ready"' not in text, "the replay was over before the signal: nothing was tested"
    assert rc == 0
