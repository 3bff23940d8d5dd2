"""Replay the 24 + 1 real recorded baccarat rounds (tests/data/real-shoes, copied from the project's
shared data with its README) through coup_from_cards and compare with the provider's recorded result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tablesense.daemon.rules.baccarat import BaccaratRules, coup_from_cards, next_card_hand, settle_baccarat
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Wager

DATA = Path(__file__).parent / "data" / "real-shoes"


def _rounds() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                out.append((f"{path.stem}#{record['round']}", record))
    return out


ROUNDS = _rounds()


def test_all_recorded_rounds_are_present() -> None:
    assert len(ROUNDS) == 25
    assert sum(1 for name, _ in ROUNDS if name.startswith("ezugi")) == 24


@pytest.mark.parametrize(("name", "record"), ROUNDS, ids=[n for n, _ in ROUNDS])
def test_recorded_round(name: str, record: dict[str, Any]) -> None:
    dealt = [Card.parse(t) for t in record["cards"]]
    coup = coup_from_cards(dealt)
    recorded = record["recorded_result"]
    assert coup.result == recorded["winner"].lower()
    assert coup.player_points == recorded["player_score"]
    assert coup.banker_points == recorded["banker_score"]
    assert (coup.player_natural or coup.banker_natural) == recorded["natural"]
    assert coup.player_pair == recorded["player_pair"]
    assert coup.banker_pair == recorded["banker_pair"]
    assert [str(c) for c in coup.player_cards] == [str(Card.parse(t)) for t in record["player"]]
    assert [str(c) for c in coup.banker_cards] == [str(Card.parse(t)) for t in record["banker"]]
    # card by card, the live state machine's question gets the same answer
    P, B = Hand.PLAYER, Hand.BANKER
    layout = [P, B, P, B] + [P] * (len(record["player"]) - 2) + [B] * (len(record["banker"]) - 2)
    assert [next_card_hand(dealt[:i]) for i in range(len(dealt) + 1)] == [*layout, None]
    # and the main wagers settle the way the recorded winner says (8-deck shoe)
    rules = BaccaratRules.from_names("baccarat", 8)
    player, banker = settle_baccarat(dealt, [Wager("1", Bet.PLAYER, 100), Wager("1", Bet.BANKER, 100)], rules)
    expected = {"player": (Outcome.WIN, Outcome.LOSE), "banker": (Outcome.LOSE, Outcome.WIN),
                "tie": (Outcome.PUSH, Outcome.PUSH)}[coup.result]
    assert (player.outcome, banker.outcome) == expected
