"""Card intake faults (the intake review): a real ``tablesense run``, Mosquitto and the simulated table.

Each scenario prints one ``FAULTS-RESULT`` line with what it measured (docs/reliability.md, "Card intake"):

* a power cut restarts daemon and shoe together: the shoe numbers from 0 again with a new session; its
  new shoe and cards are journaled, not dropped as resends;
* the shoe sends a new shoe and then the ace of spades 300 times: the daemon stays up, the repeats are one
  alarm with a count, and the daemon starts again on its own journal;
* the dealer stops after two cards: ``DEAL_STALLED`` after ``[round] stall_seconds``;
* a card drawn after a complete round before the table is cleared: ``EXTRA_CARD``, held;
* the shoe's link drops mid-round and the reader reports the last card again: ``POSSIBLE_RESCAN``, held,
  nothing more settled.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.simulators.dealer import DealtRound

from .harness import Got, Rig, journal_cards, journal_rows, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


def result(rig: Rig, scenario: str, **measured: Any) -> dict[str, Any]:
    """Delivery checks shared by the scenarios that end with a held round (so :meth:`Rig.verify`, which
    needs every round settled, does not apply): every journaled message reached the subscriber, nothing
    arrived that the journal does not hold (but the daemon's from-memory alarms), and the FAULTS-RESULT."""
    rows = journal_rows(rig.journal_dir)
    memory = {g.msg_id for g in rig.from_memory_alarms()}
    got = {g.msg_id for g in rig.sub.first_of_each()} - memory
    journal_ids = {r[1] for r in rows}
    assert journal_ids <= got, f"{len(journal_ids - got)} journaled messages never arrived"
    assert got <= journal_ids, f"published but not journaled: {sorted(got - journal_ids)[:5]}"
    summary = {"scenario": scenario, "journal_messages": len(rows), "daemon_exits": rig.daemon.exits,
               "seconds": round(time.monotonic() - rig.started, 1), **measured}
    (rig.tmp / "results.json").write_text(json.dumps(summary, indent=2))
    print(f"\nFAULTS-RESULT {json.dumps(summary)}")
    return summary


async def quiet(rig: Rig) -> None:
    """Every journaled message delivered, and the journal no longer growing (a restarted daemon journals
    its devices coming online and their status answers a moment after it is ready)."""
    while True:
        await rig.settled_through_journal()
        rows = len(journal_rows(rig.journal_dir))
        await asyncio.sleep(0.5)
        if len(journal_rows(rig.journal_dir)) == rows:
            await rig.settled_through_journal()
            return


def alarms(rig: Rig, code: str) -> list[Got]:
    """The ``raised`` messages of alarms with ``code`` (a repeat's message included)."""
    return [g for g in rig.sub.on("alarms") if g.body["code"] == code and g.body["state"] == "raised"]


async def bets_and_lock(rig: Rig, rnd: DealtRound) -> None:
    await rig.sim.pads_frames(rig.sim.pads.open_round(rnd.wagers))
    await rig.sim.pads_frames(rig.sim.pads.no_more_bets())


async def test_power_cut_restarts_daemon_and_shoe_together(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """The journal's last shoe frame has a number well above 0; after power-up the shoe numbers from 0
    with a new session. Before: its new shoe and first cards were dropped as resends, answered with the
    old number, never journaled, no alarm."""
    rig = await rigs(seed=1010)
    sim = rig.sim
    for _ in range(3):
        await sim.play_round()
    await rig.settled_through_journal()
    last_before = sim.shoe.next_seq - 1
    assert rig.daemon.kill() == -9  # the power cut: daemon ...
    await sim.power_cycle("shoe")  # ... and shoe (its power-up identity frame waits for a host)
    rig.restart_daemon()
    await sim.start_shoe()  # the dealer loads a new shoe
    for _ in range(3):
        await sim.play_round()
    await quiet(rig)
    assert await rig.daemon.terminate() == 0
    restarted = alarms(rig, "DEVICE_RESTARTED")
    assert len(restarted) == 1 and restarted[0].body["held"] and restarted[0].body["device"] == "shoe"
    dealt = [str(c) for r in sim.rounds for _, c in r.cards]
    assert journal_cards(rig.journal_dir) == dealt  # every card of both shoes, once
    assert rig.daemon.events("device_resend_dropped") == 0  # the new session's frames were no resends
    rig.verify("power_cut_daemon_and_shoe", extra={
        "shoe_seq_before_cut": last_before, "shoe_seq_after": sim.shoe.next_seq - 1,
        "device_restarted_alarms": len(restarted), "cards_dealt": len(dealt),
        "cards_journaled": len(journal_cards(rig.journal_dir))})


async def test_a_shoe_repeating_one_card_300_times(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """Before: from the 257th held alarm every input failed and was not journaled, and every later start
    of ``tablesense run`` exited 1 with a traceback."""
    rig = await rigs(seed=1011)
    sim = rig.sim
    await sim.play_round()
    frames = sim.shoe.new_shoe() + b"".join(sim.shoe.inject_card("AS") for _ in range(300))
    await sim.shoe_frames(frames)  # every frame acknowledged: journaled
    await rig.settled_through_journal()
    assert rig.daemon.kill() == -9
    started = time.monotonic()
    rig.restart_daemon()
    await rig.wait_ready()
    ready_s = time.monotonic() - started
    assert rig.daemon.running and rig.daemon.events("journal_damaged_settling_refused") == 0
    await quiet(rig)
    assert await rig.daemon.terminate() == 0
    repeats = alarms(rig, "CARD_NOT_IN_SHOE")
    assert len({g.body["alarm_id"] for g in repeats}) == 1
    assert len(repeats) <= 10 and max(g.body["count"] for g in repeats) == 256
    result(rig, "card_repeated_300_times", frames=301, alarm_messages=len(repeats),
           alarm_ids=len({g.body["alarm_id"] for g in repeats}), restart_ready_s=round(ready_s, 2))


async def test_a_stalled_deal_raises_deal_stalled(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=1012, stall_seconds=10)
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {"P1": 1000} if "P1" in rig.config.spots else
                     {next(iter(rig.config.spots)): 1000})
    await bets_and_lock(rig, rnd)
    for _ in range(2):
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        await sim._card(rnd, hand.value)
    last_card = time.monotonic()
    await wait_until(lambda: bool(alarms(rig, "DEAL_STALLED")), 30, "DEAL_STALLED")
    delay = time.monotonic() - last_card
    stalled = alarms(rig, "DEAL_STALLED")[0].body
    assert stalled["severity"] == "warning" and not stalled["held"]
    while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:  # the dealer goes on
        await sim._card(rnd, hand.value)
    await sim.pads_frames(sim.pads.round_end())
    await sim.pads_frames(sim.pads.clear())
    sim.rounds.append(rnd)
    await quiet(rig)
    assert any(g.body["state"] == "cleared" for g in rig.sub.on("alarms")
               if g.body["alarm_id"] == stalled["alarm_id"])
    assert await rig.daemon.terminate() == 0
    rig.verify("deal_stalled", extra={"stall_seconds": 10, "alarm_after_s": round(delay, 2)})
    assert 10 <= delay < 13


async def test_a_mis_pulled_card_is_held(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """Before: with the shipped ``start = "card"`` a card drawn after a complete round, before the dealer
    cleared it, silently became the next coup's first card."""
    rig = await rigs(seed=1013)
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {next(iter(rig.config.spots)): 1000})
    await bets_and_lock(rig, rnd)
    while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
        await sim._card(rnd, hand.value)
    await rig.settled_through_journal()
    rounds_before = len(rig.sub.on("results"))
    await sim.shoe_frames(sim.shoe.draw())  # mis-pulled: the wagers are still on the layout
    await rig.settled_through_journal()
    extra = alarms(rig, "EXTRA_CARD")
    assert len(extra) == 1 and extra[0].body["held"] and "cleared" in extra[0].body["text"]
    state = [g for g in rig.sub.on("round")][-1].body
    assert state["held"] and state["round"] == rnd.number and state["phase"] == "complete"
    assert len(rig.sub.on("results")) == rounds_before
    await quiet(rig)
    assert await rig.daemon.terminate() == 0
    result(rig, "mis_pulled_card", extra_card_alarms=len(extra), held=state["held"],
           round_after=state["round"])


async def test_a_card_re_read_after_a_link_loss_holds_the_round(rigs: Callable[..., Awaitable[Rig]]) -> None:
    """Before: mid-round the shoe link dropped, the reader reported the last card again with the next
    number on reconnect, and it became the Player's third card (here: the Banker's second card)."""
    rig = await rigs(seed=1014)
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {next(iter(rig.config.spots)): 1000})
    await bets_and_lock(rig, rnd)
    for _ in range(3):  # the round needs at least one more card
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        await sim._card(rnd, hand.value)
    settled_before = len(rig.sub.on("settlements"))
    await sim.shoe_runner.unplug()
    await wait_until(lambda: bool(alarms(rig, "DEVICE_LOST")), 30, "DEVICE_LOST")
    await sim.shoe_runner.replug()
    await wait_until(lambda: [g.body["state"] for g in rig.sub.on("devices/shoe")][-1:] == ["online"], 30,
                     "the shoe back online")
    last = rnd.cards[-1][1]
    await sim.shoe_frames(sim.shoe.inject_card(last))  # the reader reports the last card again
    await wait_until(lambda: bool(alarms(rig, "POSSIBLE_RESCAN")), 30, "POSSIBLE_RESCAN")
    await asyncio.sleep(0.5)
    await rig.settled_through_journal()
    rescan = alarms(rig, "POSSIBLE_RESCAN")[0].body
    state = [g for g in rig.sub.on("round")][-1].body
    assert rescan["held"] and state["held"] and "POSSIBLE_RESCAN" in state["hold_codes"]
    assert len(state["cards"]) == 3  # the re-read card is in no hand
    settled_after = len(rig.sub.on("settlements"))
    assert settled_after == settled_before  # nothing more settled while the supervisor decides
    await quiet(rig)
    assert await rig.daemon.terminate() == 0
    result(rig, "card_re_read_after_link_loss", possible_rescan_alarms=len(alarms(rig, "POSSIBLE_RESCAN")),
           held=state["held"], public_cards=len(state["cards"]),
           settlements_while_held=settled_after - settled_before)
