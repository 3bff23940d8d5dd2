"""Scenario 6: the journal's disk becomes unwritable under a running daemon.

The daemon runs with ``RLIMIT_FSIZE`` (set in the child before exec; its log goes through a pipe, so
only the journal is limited): once the journal's files reach the limit every append fails as on a full
disk. Settling must stop (the failed input is neither applied nor acknowledged, so the dealer cannot go
on), with a critical log line and the failure in the retained status; nothing may be published that was
not journaled, and what was journaled must still be delivered (the broker is down while the disk fills,
so a backlog waits that the relay must deliver without being able to record any acknowledgement); the
journal must not be damaged: a daemon started without the limit opens it, takes the frames the devices
resend, and everything journaled is delivered exactly once after de-duplication."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tablesense.daemon.broker import mosquitto_binary
from tablesense.simulators.dealer import DealtRound

from .harness import Rig, journal_cards, journal_rows, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

LIMIT = 3_500_000
"""Bytes any file of the daemon may reach: the WAL (checkpointed at 1,000 pages, ~4 MB) reaches it after a
few rounds."""


def track_round(rig: Rig) -> dict[str, Any]:
    """Remember the round the dealer is in and the card it is dealing, even if the deal times out."""
    sim = rig.sim
    holder: dict[str, Any] = {}
    original = sim._card

    async def card(rnd: DealtRound, position: str) -> bool:
        holder["round"] = rnd
        holder["card"] = (position, sim.shoe.next_card)
        return await original(rnd, position)

    sim._card = card  # type: ignore[method-assign]
    return holder


def status_details(rig: Rig) -> list[str]:
    return [str(g.body.get("detail", "")) for g in rig.sub.snapshot() if g.topic.endswith("/status")]


async def test_journal_disk_unwritable(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=606, fsize=LIMIT, ack_timeout=5.0)
    sim = rig.sim
    holder = track_round(rig)
    await sim.play_round()
    await rig.settled_through_journal()
    # The broker goes away first, so that when the disk fills a backlog is waiting in the outbox: the relay
    # must deliver it while the journal cannot record a single acknowledgement.
    rig.broker.stop()
    with pytest.raises(TimeoutError):  # the daemon stops acknowledging: settling has stopped
        for _ in range(1000):
            await sim.play_round()
    stopped_after = len(sim.rounds)
    assert stopped_after >= 3, "the limit was hit before the table was under way"
    assert rig.daemon.running, "the daemon died on a full disk:\n" + rig.daemon.tail()
    await wait_until(lambda: rig.daemon.events("journal_append_failed") >= 1, 10, "the critical log line")
    failure = next(json.loads(line) for line in rig.daemon.text().splitlines()
                   if '"event":"journal_append_failed"' in line)
    assert failure["level"] == "critical"
    rows_at_failure = len(journal_rows(rig.journal_dir))
    backlog = sum(1 for r in journal_rows(rig.journal_dir) if not r[3])
    assert backlog > 32, "the backlog should exceed the relay's in-flight window"
    partial = holder.get("round")
    partial = partial if partial is not None and partial not in sim.rounds else None

    rig.broker.start()
    await rig.settled_through_journal(timeout=60)  # delivered although no acknowledgement can be recorded
    # While the disk stays full nothing new is journaled, so nothing new can be published.
    assert len(journal_rows(rig.journal_dir)) == rows_at_failure
    # (the from-memory INTERNAL_ERROR alarm is outside the journal by design: Rig.from_memory_alarms; paho
    # may deliver it after the broker is back if the relay had not yet seen the broker go)
    from_memory = {g.msg_id for g in rig.from_memory_alarms()}
    assert rig.sub.distinct_ids() - from_memory == {r[1] for r in journal_rows(rig.journal_dir)}
    # The failure reaches the floor in the retained status (the relay connected after it happened).
    await wait_until(lambda: any("journal" in d for d in status_details(rig)), 30,
                     "the journal failure in the retained status")
    assert rig.daemon.running
    assert await rig.daemon.terminate() == 0  # SIGTERM with the journal unwritable: still a clean exit

    # Space again: the journal is intact, a new daemon opens it and takes what the devices resend (they
    # keep every frame no AK covers: the card whose journaling failed is taken again, never lost).
    rig.daemon.fsize = None
    rig.restart_daemon()
    for runner, dev in ((sim.shoe_runner, sim.shoe), (sim.pads_runner, sim.pads)):
        last = (dev.next_seq - 1) % 100_000
        await wait_until(lambda: runner.acked(last), 60, f"{dev.device} frames acknowledged")  # noqa: B023
    await rig.settled_through_journal()
    assert await rig.daemon.terminate() == 0
    new_failures = rig.daemon.text().split('"event":"daemon_ready"')[-1].count("journal_append_failed")
    assert new_failures == 0
    # The INTERNAL_ERROR alarm published from memory (the journal had just failed): at most one per
    # failing spell, seq 0, never a row of the journal; delivered only if the broker was up at the time.
    memory = rig.from_memory_alarms()
    assert len(memory) <= 1 and all(g.body["code"] == "INTERNAL_ERROR" for g in memory)
    assert sim.shoe.shoes == 1
    dealt = [str(c) for c in sim.shoe.dealt]  # every card out of the shoe, also the one whose AK never came
    journaled = journal_cards(rig.journal_dir)
    assert journaled == dealt, "every card dealt is journaled exactly once, in order"
    complete = sim.rounds[:stopped_after]
    results = {(g.body["shoe"], g.body["round"]) for g in rig.sub.first_of_each()
               if g.topic.endswith("/results")}
    if partial is not None and (not partial.cards or partial.cards[-1] != holder["card"]):
        # the card that found the disk full (never acknowledged, so not in the round as the dealer saw it)
        # was resent after the restart and journaled (journaled == dealt above): it is in the round the
        # daemon settled -- as its 4th card it decides the pair wagers, as its last it completes the round
        # (where the disk fills depends on the rows' sizes). Otherwise that card was journaled and
        # acknowledged (already in the round as dealt) and the disk filled at the pads' step after it.
        partial.cards.append(holder["card"])
    if partial is not None and len(results) == len(complete) + 1:
        complete, partial = [*complete, partial], None
    rig.verify("journal_unwritable", complete_rounds=complete, partial=partial,
               extra={"fsize_limit": LIMIT, "rounds_before_disk_full": stopped_after,
                      "journal_rows_at_failure": rows_at_failure, "backlog_at_failure": backlog,
                      "critical_log_lines": rig.daemon.events("journal_append_failed"),
                      "cards_dealt": len(dealt), "cards_journaled": len(journaled),
                      "from_memory_alarms_received": len(memory)})


async def test_journal_failure_reaches_status_while_connected(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """The critical condition must reach the floor while the broker link stays up, not only after a
    reconnect: the retained status (or an alarm) must say that settling has stopped."""
    rig = await rigs(seed=607, fsize=LIMIT, ack_timeout=5.0)
    with pytest.raises(TimeoutError):
        for _ in range(1000):
            await rig.sim.play_round()
    await wait_until(lambda: rig.daemon.events("journal_append_failed") >= 1, 10, "the critical log line")
    assert rig.daemon.events("mqtt_connected") == 1  # the relay never reconnected
    await wait_until(lambda: any("journal" in d for d in status_details(rig)), 15,
                     "the journal failure in the status while connected")
