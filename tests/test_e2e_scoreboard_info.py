"""End to end: `tablesense run` publishes the baccarat scoreboard and the table info retained.

Simulated shoe and pads on pseudo-terminals -> `tablesense run` (subprocess) -> a Mosquitto this module
owns. A display that connects after the rounds were dealt gets the retained ``scoreboard`` and ``info`` at
once; the roads equal the scoreboard built from the published results, and the info carries the config's
wagers, paytables and limits.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiomqtt
import msgspec
import pytest
from e2e_support import start_table

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.messages import RoundResults
from tablesense.daemon.scoreboard import Scoreboard

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(180)]

ROUNDS = 12


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> MosquittoBroker:
    b = MosquittoBroker(tmp_path_factory.mktemp("e2e-scoreboard-broker"))
    b.start()
    yield b
    b.stop()


async def late_display(broker: MosquittoBroker, table: str) -> dict[str, tuple[bool, dict[str, Any]]]:
    """A fresh subscriber (clean session) to ``scoreboard`` and ``info``: what the broker hands it at
    once, as ``{suffix: (retain flag, body)}``."""
    got: dict[str, tuple[bool, dict[str, Any]]] = {}
    async with aiomqtt.Client(broker.host, broker.port, identifier=f"late-{table}") as client:
        for suffix in ("scoreboard", "info"):
            await client.subscribe(f"tablesense/{table}/{suffix}", qos=1)
        async with asyncio.timeout(20):
            async for m in client.messages:
                raw = m.payload if isinstance(m.payload, bytes | bytearray) else b""
                got[str(m.topic).rsplit("/", 1)[1]] = (bool(m.retain), json.loads(raw))
                if len(got) == 2:
                    break
    return got


async def test_a_late_display_gets_the_retained_scoreboard_and_table_info(broker: MosquittoBroker,
                                                                          tmp_path: Path) -> None:
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", seed=21, table="bac-sb")
    try:
        for _ in range(ROUNDS):
            await sim.play_round()
        await rec.wait_for(lambda r: len(r.on("results")) >= ROUNDS and any(
            b.body.get("round") == ROUNDS for b in r.on("scoreboard")), timeout=60)
        shown = await late_display(broker, config.table)
    finally:
        code = await daemon.terminate()
        daemon.kill()
        await rec.stop()
        await sim.close()
    assert code == 0, daemon.log.read_text()[-3000:]

    # one scoreboard per round (after its results) plus the empty board of the new shoe
    boards = rec.on("scoreboard")
    assert [b.body["round"] for b in boards] == [None, *range(1, ROUNDS + 1)]
    assert boards[0].body["roads"]["bead_plate"] == []

    retained, board = shown["scoreboard"]
    assert retained and board["schema"] == "tablesense.scoreboard" and board["round"] == ROUNDS
    expected = Scoreboard()
    for r in rec.on("results"):
        expected.add_results(msgspec.json.decode(json.dumps(r.body), type=RoundResults))
    roads = board["roads"]
    ours = expected.to_dict()
    for road in ("bead_plate", "big_road", "big_eye_boy", "small_road", "cockroach_pig"):
        assert roads[road] == json.loads(json.dumps(ours[road])), road
    stats = roads["stats"]
    assert stats["rounds"] == ROUNDS == len(roads["bead_plate"])
    dealt = sum(len(rnd.cards) for rnd in sim.rounds)
    burned = 416 - dealt - stats["cards_remaining"]
    assert 0 <= burned <= 11  # the start-of-shoe burn: up to ten cards plus the exposed one
    assert stats["cards_remaining"] == rec.on("round")[-1].body["cards_remaining"]

    retained, info = shown["info"]
    assert retained and info["schema"] == "tablesense.table_info"
    assert (info["table"], info["game"], info["decks"], info["currency"]) == (
        config.table, "baccarat", config.shoe_decks, config.currency)
    limits = {w["bet"]: (w["min"], w["max"]) for w in info["wagers"] + info["main_wagers"]}
    assert limits == {bet: (w.min, w.max) for bet, w in config.wagers.items()}
    assert info["seats"] == list(config.seats)
    assert not {"devices", "mqtt", "journal"} & set(info)
