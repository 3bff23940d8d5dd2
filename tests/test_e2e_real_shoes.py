"""Real input end to end: the 24 consecutive Ezugi rounds (tests/data/real-shoes/, recorded at a live
baccarat table) dealt through the simulated shoe as a scripted sequence, over a pty, into
`tablesense run`, out through Mosquitto. Every round's published result and pair flags must equal the
recorded ones, and every settlement what `tablesense settle` gives (real input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import start_table
from test_e2e_games import check_settlements, finish

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary
from tablesense.daemon.rules.cards import Card

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(300)]

DATA = Path(__file__).parent / "data" / "real-shoes" / "ezugi_queenco_32100_2022-11-28.jsonl"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> MosquittoBroker:
    b = MosquittoBroker(tmp_path_factory.mktemp("real-broker"))
    b.start()
    yield b
    b.stop()


async def test_ezugi_rounds_published_as_recorded(broker: MosquittoBroker, tmp_path: Path) -> None:
    recorded = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    assert len(recorded) == 24
    cards = [str(Card.parse(c)) for r in recorded for c in r["cards"]]
    config, sim, daemon, rec = await start_table(broker, tmp_path, "baccarat", cards=cards,
                                                 table="ezugi-32100")
    bets = {"1P": 1000, "2B": 2000, "1T": 500, "1PP": 500, "1BP": 1000, "2PP": 2500, "1HM": 500, "1DB": 500}
    try:
        for _ in recorded:
            await sim.play_round(bets)
    finally:
        await finish(sim, daemon, rec, len(recorded))
    results = rec.on("results")
    assert len(results) == 24
    for res, want in zip(results, recorded, strict=True):
        b, r = res.body["baccarat"], want["recorded_result"]
        assert b["player"] == [str(Card.parse(c)) for c in want["player"]]
        assert b["banker"] == [str(Card.parse(c)) for c in want["banker"]]
        assert b["winner"] == r["winner"].lower()
        assert (b["player_total"], b["banker_total"]) == (r["player_score"], r["banker_score"])
        assert (b["player_pair"], b["banker_pair"]) == (r["player_pair"], r["banker_pair"])
        assert (b["player_natural"] or b["banker_natural"]) == r["natural"]
    assert check_settlements(config, sim, rec) == 24 * len(bets)  # every wager settled every round
    assert not [a.body["code"] for a in rec.on("alarms")]
