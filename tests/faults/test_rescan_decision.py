"""A possible rescan decided over MQTT: a real ``tablesense run``, Mosquitto and the resending simulators.

Mid-round (three cards out) the shoe's link is lost; on reconnect the reader reports the last card again
and the daemon holds the round with ``POSSIBLE_RESCAN`` (docs/reliability.md, "Card intake"). A
supervisor then decides with the MQTT command ``cmd/rescan`` (docs/mqtt.md, "Commands"), bound to the
round it names:

* ``set_aside``: the reader reported one card twice. The dealer had already drawn the next card, which
  waited behind the decision; the round settles on the cards really dealt, the re-read card joins no hand
  and the floor record lists it as ``set_aside``;
* ``keep``: the card is a real second copy. It takes the next place in the deal (here the Banker's second
  card) and the round settles with it.

Each settlement is checked against ``tablesense settle``'s logic for the cards as decided, every
journaled message must reach the subscriber, and a ``rescan`` naming another round is refused. Each
scenario prints one ``FAULTS-RESULT`` line.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import aiomqtt
import pytest
from command_support import body
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.rules.baccarat import next_card_hand
from tablesense.simulators.dealer import DealtRound

from .harness import Rig, expected_settlements, settlement_key, wait_until
from .test_intake_faults import alarms, bets_and_lock, quiet, result

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240),
              pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")]


async def command(rig: Rig, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Send ``cmd/{name}`` as the floor does (MQTT v5, response topic under ``reply/``, correlation data)
    and return the daemon's answer."""
    base = f"tablesense/{rig.config.table}"
    reply_to = f"{base}/reply/faults-supervisor"
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.ResponseTopic = reply_to
    props.CorrelationData = name.encode()
    async with aiomqtt.Client(rig.broker.host, rig.broker.port,
                              protocol=aiomqtt.ProtocolVersion.V5) as client:
        await client.subscribe(reply_to, qos=1)
        await client.publish(f"{base}/cmd/{name}", body("supervisor-7", args), qos=1, properties=props)
        async with asyncio.timeout(30):
            async for m in client.messages:
                assert isinstance(m.payload, bytes | bytearray)
                answer: dict[str, Any] = json.loads(m.payload)
                return answer
    raise AssertionError("no answer")  # pragma: no cover - the loop returns or times out


async def deal_on(rig: Rig, rnd: DealtRound) -> None:
    """The dealer deals the round to its end by the third-card rules, then round end and clear."""
    sim = rig.sim
    while (hand := next_card_hand([c for _, c in rnd.cards])) is not None:
        assert await sim._card(rnd, hand.value)
    await sim.pads_frames(sim.pads.round_end())
    await sim.pads_frames(sim.pads.clear())
    sim.rounds.append(rnd)


def settlements_by_round(rig: Rig) -> dict[tuple[int, int], list[tuple[Any, ...]]]:
    out: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for g in rig.sub.on("settlements"):
        out.setdefault((g.body["shoe"], g.body["round"]), []).append(settlement_key(g.body, True))
    return out


async def rescan_scenario(rig: Rig, action: Literal["keep", "set_aside"]) -> dict[str, Any]:
    sim = rig.sim
    await sim.play_round()
    rnd = DealtRound(len(sim.rounds) + 1, {"1P": 1000, "2B": 2000, "1T": 500, "1PP": 500, "2BP": 500})
    await bets_and_lock(rig, rnd)
    for _ in range(3):  # P1 B1 P2: the round needs at least one more card
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        assert await sim._card(rnd, hand.value)
    await sim.shoe_runner.unplug()
    await wait_until(lambda: bool(alarms(rig, "DEVICE_LOST")), 30, "DEVICE_LOST")
    await sim.shoe_runner.replug()
    await wait_until(lambda: [g.body["state"] for g in rig.sub.on("devices/shoe")][-1:] == ["online"], 30,
                     "the shoe back online")
    reread = rnd.cards[-1][1]
    await sim.shoe_frames(sim.shoe.inject_card(reread))  # the reader reports the last card again
    await wait_until(lambda: bool(alarms(rig, "POSSIBLE_RESCAN")), 30, "POSSIBLE_RESCAN")
    await rig.settled_through_journal()
    state = rig.sub.on("round")[-1].body
    shoe, number = state["shoe"], state["round"]
    assert state["held"] and "POSSIBLE_RESCAN" in state["hold_codes"]
    if action == "set_aside":  # the dealer goes on meanwhile: the next card queues behind the decision
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        assert await sim._card(rnd, hand.value)
        await rig.settled_through_journal()
        assert len(rig.sub.on("round")[-1].body["cards"]) == 3  # neither card placed yet
    assert not settlements_by_round(rig).get((shoe, number))  # nothing settled while held

    wrong = await command(rig, "rescan", {"shoe": shoe, "round": number + 1, "action": action})
    assert wrong["ok"] is False and f"{shoe}-{number}" in wrong["reason"], wrong
    answer = await command(rig, "rescan", {"shoe": shoe, "round": number, "action": action})
    assert answer["ok"] is True and answer["command"] == "rescan", answer
    if action == "keep":  # the re-read card is a real card: the next place in the deal
        hand = next_card_hand([c for _, c in rnd.cards])
        assert hand is not None
        rnd.cards.append((hand.value, reread))
    await deal_on(rig, rnd)
    await sim.play_round()  # the table goes on
    await quiet(rig)
    assert await rig.daemon.terminate() == 0

    got = settlements_by_round(rig)
    expected = expected_settlements(sim, rnd)
    assert Counter(got[(shoe, number)]) == Counter(expected), (got[(shoe, number)], expected)
    floor = next(g.body for g in rig.sub.on("floor/rounds")
                 if (g.body["shoe"], g.body["round"]) == (shoe, number))
    listed = [(c["card"], c["status"]) for c in floor["cards"]]
    dealt = [str(c) for _, c in rnd.cards]
    assert [card for card, status in listed if status == "dealt"] == dealt
    set_aside = [card for card, status in listed if status == "set_aside"]
    assert set_aside == ([str(reread)] if action == "set_aside" else [])
    results = {(g.body["shoe"], g.body["round"]): g.body for g in rig.sub.on("results")}
    assert len(results) == len(sim.rounds)  # every round completed, the decided one included
    coup = results[(shoe, number)]["baccarat"]
    rescan_alarm = alarms(rig, "POSSIBLE_RESCAN")[0].body["alarm_id"]
    assert any(g.body["alarm_id"] == rescan_alarm and g.body["state"] != "raised"
               for g in rig.sub.on("alarms")), "the POSSIBLE_RESCAN alarm was never released"
    return result(rig, f"possible_rescan_{action}_over_mqtt", round=f"{shoe}-{number}", reread=str(reread),
                  cards=dealt, set_aside=set_aside, winner=coup["winner"],
                  totals=[coup["player_total"], coup["banker_total"]], settlements=len(expected),
                  net=sum(s[-2] for s in expected), wrong_round_refused=wrong["reason"])


# With this shuffle the decision changes the coup (checked by the expected settlements in both tests):
# the round's first three cards are KH JH JC; set aside, the Banker's second card is the shoe's next,
# 4D, and the Banker wins 4 over 0 (the Player draws KH); kept, the re-read JC is the Banker's second
# card, the Player draws 4D and wins 4 over 0, and the Banker's JH JC is a mixed pair (1BP/2BP win).
SHUFFLE = 1029


async def test_a_possible_rescan_set_aside_by_the_supervisor(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=SHUFFLE)
    summary = await rescan_scenario(rig, "set_aside")
    assert summary["set_aside"] == ["JC"] and summary["cards"][:4] == ["KH", "JH", "JC", "4D"]
    assert summary["winner"] == "banker"


async def test_a_possible_rescan_kept_by_the_supervisor(rigs: Callable[..., Awaitable[Rig]]) -> None:
    rig = await rigs(seed=SHUFFLE)
    summary = await rescan_scenario(rig, "keep")
    assert not summary["set_aside"] and summary["cards"][:4] == ["KH", "JH", "JC", "JC"]
    assert summary["winner"] == "player"
