"""Adversarial review of card intake: a full disk while the dealer keeps drawing, and resends that do not
get through.

A real ``tablesense run``, Mosquitto and the simulated table on ptys. Mid-round the journal's disk is
full (the daemon's ``RLIMIT_FSIZE`` soft limit lowered to its journal's size with ``prlimit(2)``; the
next commit fails as with ``SQLITE_FULL``), and the shoe's resends stop getting through (a noisy line;
the simulated shoe simply does not resend). The dealer draws card A (its journaling fails), B and C
(held back behind A), then, after the daemon's 3 s wait for a resend, D; then space returns.

docs/protocol.md §3 promises: nothing is acknowledged before it is journaled, and no ``AK`` covers a
frame that is not. Before this review, when the daemon's retry of A failed it dropped the frames it was
holding back (B, C: received intact), relying on the device to resend them; the next release journaled A
and then D "with the gap" (``SEQUENCE_GAP``), and its cumulative ``AK`` made the shoe discard B and C.
Two cards that left the shoe, that the daemon had received, were recorded nowhere.
"""

from __future__ import annotations

import resource
from collections.abc import Awaitable, Callable

import pytest
from faults.harness import Rig, journal_cards, wait_until

from tablesense.daemon.broker import mosquitto_binary
from tablesense.simulators.dealer import DealtRound

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


def disk_limit(pid: int, size: int) -> None:
    """The daemon's file-size soft limit (its hard limit stays unlimited, so it can be raised again)."""
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))


async def test_cards_received_during_a_disk_full_spell_are_never_acknowledged_over(
        rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=2301)
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {next(iter(rig.config.spots)): 1000})
    await sim.pads_frames(sim.pads.open_round(rnd.wagers))
    await sim.pads_frames(sim.pads.no_more_bets())
    await rig.settled_through_journal()
    shoe = sim.shoe_runner
    shoe.resend_after = 3600.0  # its resends no longer get through
    shoe.heartbeat = None
    assert rig.daemon.proc is not None
    pid = rig.daemon.proc.pid
    disk_limit(pid, max(p.stat().st_size for p in rig.journal_dir.iterdir()))  # the disk is full
    drawn: list[str] = []

    async def draw() -> int:
        drawn.append(str(sim.shoe.next_card))
        await shoe.emit(sim.shoe.draw)
        return sim.shoe.next_seq - 1

    failed_before = rig.daemon.events("journal_append_failed")
    await draw()  # A: not journaled
    await wait_until(lambda: rig.daemon.events("journal_append_failed") > failed_before, 30,
                     "the journal append of card A to fail")
    await draw()  # B and C: held back behind A
    await draw()
    released = rig.daemon.events("device_frames_released")
    await wait_until(lambda: rig.daemon.events("device_frames_released") > released, 30,
                     "the daemon's retry of A after its wait for a resend")
    last = await draw()  # D
    disk_limit(pid, resource.RLIM_INFINITY)  # space again
    await wait_until(lambda: shoe.acked(last), 30, "the acknowledgement of card D")
    await rig.settled_through_journal()
    journaled = journal_cards(rig.journal_dir)
    assert journaled[-len(drawn):] == drawn, \
        f"cards acknowledged but journaled nowhere: drew {drawn}, journal ends {journaled[-len(drawn):]}"
    gaps = [g.body for g in rig.sub.on("alarms") if g.body["code"] == "SEQUENCE_GAP"]
    assert not gaps, gaps
    assert rig.daemon.running
