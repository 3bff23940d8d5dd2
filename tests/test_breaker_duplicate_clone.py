"""Adversarial review of the duplicate-instance guard: a spare controller whose disk was cloned from the
table's controller (an image, a VM snapshot, a restored backup) holds a copy of the very same journal,
so its journal epoch is the table's. Left running, it is two live daemons for one table.

Tried on real processes: two ``tablesense run`` with the same config but each its own copy of one
journal (cloned while the first was stopped) and its own simulated table on ptys, on one real
Mosquitto. Before this review the relay treated a status of the same epoch as its own journal's
(``Relay._foreign`` compares the epoch as well as the instance id), so neither stepped back: they took
the shared client id from each other again and again and both published, interleaving two ``seq``
streams of the same epoch (e.g. 34..56 then 22..47), with no ``DUPLICATE_INSTANCE`` and no ``standby``.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from faults.harness import DaemonProc, Rig, wait_until

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.config import parse_config
from tablesense.simulators.dealer import SimTable

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def test_a_spare_with_a_cloned_journal_steps_back(rigs: Callable[..., Awaitable[Rig]],
                                                          tmp_path: Path) -> None:
    rig = await rigs(seed=2201)
    await rig.sim.play_round()
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    clone = tmp_path / "clone-journal"
    shutil.copytree(rig.journal_dir, clone)  # the spare's disk: a copy of the table's journal
    dev = tmp_path / "clone-dev"
    text = (rig.config_path.read_text().replace(str(rig.journal_dir), str(clone))
            .replace(str(rig.tmp / "dev"), str(dev)))
    path = tmp_path / "clone.toml"
    path.write_text(text)
    spare_sim = SimTable(parse_config(text), dev, seed=2202, ack_timeout=60.0)
    for runner in (spare_sim.shoe_runner, spare_sim.pads_runner):
        runner.resend_fallback = 60.0
    await spare_sim.start()
    rig.restart_daemon()
    await rig.wait_ready()
    spare = DaemonProc(path, tmp_path / "clone.log")
    spare.start()
    try:
        await spare_sim.wait_host(30)
        await asyncio.gather(rig.sim.play_round(), spare_sim.play_round())  # both dealers deal a round

        def standby() -> list[dict[str, Any]]:
            return [g.body for g in rig.sub.snapshot() if g.topic.endswith("/status")
                    and g.body.get("state") == "standby"]

        await wait_until(lambda: bool(standby()), 30, "one of the two instances to step back (standby)")
        stepped = [p for p in (rig.daemon, spare) if p.events("mqtt_duplicate_instance_standby")]
        assert len(stepped) == 1, "exactly one instance steps back"
        keeper = spare if stepped[0] is rig.daemon else rig.daemon
        assert keeper.running and stepped[0].running
        await wait_until(lambda: any(g.body.get("code") == "DUPLICATE_INSTANCE" for g in rig.sub.snapshot()),
                         30, "the DUPLICATE_INSTANCE alarm")
        flaps = keeper.events("mqtt_disconnected")
        await asyncio.sleep(5)  # the scenario's length: a flap would show as more disconnections
        assert keeper.events("mqtt_disconnected") == flaps, "the two instances still take the session over"
    finally:
        spare.cleanup()
        await spare_sim.close()
