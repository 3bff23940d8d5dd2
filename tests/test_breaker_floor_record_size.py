"""Adversarial review of the floor record's size against the shipped broker's message size limit.

``deploy/mosquitto/tablesense-tls.conf`` refuses any message over 256 KiB (``message_size_limit
262144``; docs/security.md "Bounds": "Commands and messages are small"). A round's floor record
(``floor/rounds``) lists every card, spot change, alarm and command of the round, each list bounded at
1,024 items, but the record as a whole is not bounded to fit the broker: a shoe repeating one card
(the intake review's "ace of spades 300 times", here 1,100 times) and a bet pad reporting a locked
spot back and forth 1,100 times during one held round make a record of about 300 KB. With the shipped
limit the broker refuses it (negative PUBACK): the daemon retries it every 30 s for ever, the floor
never receives the round's record, and ``replay`` cannot deliver it either.

Worse, Mosquitto 2.0.11 answers such a PUBLISH by closing the daemon's connection: the daemon reconnects,
publishes its outbox in order, starting with that record, and is disconnected again, several times a
second, for ever: no later round state, result, settlement or alarm reaches the floor or the displays.

Tried on real processes: ``tablesense run``, the simulated table on ptys, and a Mosquitto the test owns
with the shipped ``message_size_limit``; the round is voided by a supervisor's command over MQTT and the
dealer then plays one more round.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from command_support import body
from faults import harness
from faults.harness import Rig, journal_rows, wait_until
from paho.mqtt.enums import CallbackAPIVersion

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.drivers.events import SpotChanged, SpotState
from tablesense.simulators.dealer import DealtRound

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]

SHIPPED_LIMIT = 262144
"""``message_size_limit`` of deploy/mosquitto/tablesense-tls.conf."""


def test_the_limit_is_the_shipped_one() -> None:
    deploy = Path(__file__).resolve().parent.parent / "deploy" / "mosquitto"
    conf = (deploy / "tablesense-tls.conf").read_text()
    assert f"\nmessage_size_limit {SHIPPED_LIMIT}\n" in conf


@pytest.fixture(autouse=True)
def _shipped_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every broker of this module's rigs (the ``rigs`` fixture) has the shipped message size limit."""
    monkeypatch.setattr(harness, "MosquittoBroker",
                        functools.partial(MosquittoBroker, extra=f"message_size_limit {SHIPPED_LIMIT}"))


def send_command(rig: Rig, name: str, payload: bytes) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"floor-{uuid.uuid4().hex[:8]}",
                         protocol=paho.MQTTv5)
    client.connect(rig.broker.host, rig.broker.port)
    client.loop_start()
    try:
        client.publish(f"tablesense/{rig.config.table}/cmd/{name}", payload, qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


async def test_a_held_rounds_floor_record_reaches_the_floor(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=2401)
    sim = rig.sim
    await sim.play_round()
    spot = next(iter(rig.config.spots))
    rnd = DealtRound(len(sim.rounds) + 1, {spot: 1000})
    await sim.pads_frames(sim.pads.open_round(rnd.wagers))
    await sim.pads_frames(sim.pads.no_more_bets())
    for _ in range(2):
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        await sim._card(rnd, hand.value)
    await sim.shoe_frames(sim.shoe.draw_unreadable())  # CARD_UNREADABLE: the round is held
    for _ in range(22):  # the shoe reports one card again and again (50 frames at a time)
        await sim.shoe_frames(b"".join(sim.shoe.inject_card("AS") for _ in range(50)))
    for i in range(22):  # the locked spot's pad reports its stake back and forth
        await sim.pads_frames(b"".join(
            sim.pads.emit(lambda s, a=1000 + ((i * 50 + j) % 2) * 500: SpotChanged(
                sim.pads.device, s, spot, SpotState.PLACED, a)) for j in range(50)))
    await rig.settled_through_journal()
    state = [g for g in rig.sub.on("round")][-1].body
    assert state["held"]
    journaled_before = sum(1 for r in journal_rows(rig.journal_dir) if r[2] == "floor/rounds")
    send_command(rig, "void_round", body("supervisor 3", {"shoe": state["shoe"], "round": state["round"],
                                                          "reason": "faulty shoe"}))
    await wait_until(lambda: sum(1 for r in journal_rows(rig.journal_dir) if r[2] == "floor/rounds")
                     > journaled_before, 30, "the voided round's floor record in the journal")
    results_before = len(rig.sub.on("results"))
    await sim.pads_frames(sim.pads.clear())
    await sim.play_round()  # the table goes on
    await wait_until(lambda: len(rig.sub.on("results")) > results_before, 30,
                     "the next round's results at the floor subscriber")
    voided = (state["shoe"], state["round"])

    def voided_record() -> bool:
        return any((g.body["shoe"], g.body["round"]) == voided for g in rig.sub.on("floor/rounds"))

    await wait_until(voided_record, 30, f"the floor record of the voided round {voided} at the floor")
    assert rig.daemon.events("mqtt_disconnected") == 0, "the broker kept closing the daemon's connection"
    assert rig.daemon.running
