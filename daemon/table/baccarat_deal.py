"""Baccarat dealing: P, B, P, B, then third cards (58 Pa. Code § 627a.8, § 631a.11).

Perfect Pairs and House Money are decided once the fourth card is known (§ 627a.8(d), § 627c.1(c));
Player, Banker, Tie, Dragon Bonus, Dragon 7 and Panda 8 once the round is complete. All by
:mod:`daemon.rules.baccarat`. Every card is public as dealt (rules.md §1.4 option 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import BaccaratOutcome
from tablesense.daemon.rules.baccarat import (
    coup_from_cards,
    next_card_hand,
    settle_baccarat,
    settle_two_card_wagers,
)
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Settlement
from tablesense.daemon.table.game import Face, GameRound, LockedWager, Outcome, memo

__all__ = ["BaccaratRound"]

_TWO_CARD = frozenset({Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY})


class BaccaratRound(GameRound):
    """A baccarat or EZ Baccarat round."""

    game = "baccarat"
    ends_by_button = False

    def __init__(self, config: TableConfig, rules: Any, wagers: Sequence[LockedWager]) -> None:
        super().__init__(config, rules, wagers)
        self._two_card: tuple[tuple[Card, ...], list[tuple[LockedWager, Settlement]]] | None = None
        """The two-card wagers' settlements and the first four cards they were settled on."""

    @memo
    def _cards(self) -> list[Card]:
        return [s.card for s in self.slots if s.card is not None]

    @memo
    def next_position(self) -> tuple[str, Face] | None:
        """§ 627a.8(c) and § 631a.11 via :func:`daemon.rules.baccarat.next_card_hand`."""
        hand = next_card_hand(self._cards())
        return (hand.value, Face.UP) if hand is not None else None

    @property
    def initial_deal_done(self) -> bool:
        """The round's last card is out (the round uses 4 to 6 cards)."""
        return self._deal_done()

    @memo
    def _deal_done(self) -> bool:
        cards = self._cards()
        return len(cards) >= 4 and len(cards) == len(self.slots) and next_card_hand(cards) is None

    def complete(self) -> bool:
        """Complete when the rules call for no more cards."""
        return self.initial_deal_done

    def on_round_end(self) -> bool:
        """Baccarat ends by its cards; the button does not apply mid-deal."""
        return False

    @memo
    def due(self) -> list[tuple[LockedWager, Settlement]]:
        """Two-card wagers from card 4; every other wager when the round is complete."""
        cards = self._cards()
        out: list[tuple[LockedWager, Settlement]] = []
        if len(cards) < 4:
            return out
        two = [w for w in self.settled_wagers() if w.bet in _TWO_CARD]
        if two:
            first_four = tuple(cards[:4])
            if self._two_card is None or self._two_card[0] != first_four:  # cards 5 and 6 change nothing
                self._two_card = first_four, list(zip(
                    two, settle_two_card_wagers(first_four, [w.for_rules(False) for w in two], self.rules),
                    strict=True))
            out += self._two_card[1]
        if self.complete():
            rest = [w for w in self.settled_wagers() if w.bet not in _TWO_CARD]
            if rest:
                out += zip(rest, settle_baccarat(cards, [w.for_rules(False) for w in rest], self.rules),
                           strict=True)
        return out

    def outcome(self, public: bool) -> Outcome:
        """The coup (every baccarat card is face up, so public and full results are the same: one
        object, made once)."""
        return self._outcome()

    @memo
    def _outcome(self) -> Outcome:
        if not self.complete():
            return Outcome()
        c = coup_from_cards(self._cards())
        return Outcome(baccarat=BaccaratOutcome(
            player=tuple(str(x) for x in c.player_cards), banker=tuple(str(x) for x in c.banker_cards),
            player_total=c.player_points, banker_total=c.banker_points, winner=c.result,
            player_natural=c.player_natural, banker_natural=c.banker_natural,
            player_pair=c.player_pair, banker_pair=c.banker_pair,
            dragon_7=c.is_dragon_7, panda_8=c.is_panda_8))
