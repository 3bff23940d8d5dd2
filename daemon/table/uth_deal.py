"""Ultimate Texas Hold 'Em dealing, with the card-to-position order from the config (rules.md §3).

Two cards to each seat with a wager and two to the dealer, ``card_by_card`` (a card to each seat then
the dealer, twice) or in ``stacks`` (two to each seat in turn, then two to the dealer); the five
community cards ``before`` or ``after`` the hands, after ``burn_before_board`` burn cards. Every card is
face down until the dealer's reveal (round-end) button. Ultimate Pairs is settled at the reveal,
because paytable F uses the dealer's cards (58 Pa. Code § 653b.5(e)), by
:func:`daemon.rules.uth.settle_uth`; an ineligible wager (no Ante, § 653b.5(a)) is returned at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import BoxResult
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Settlement
from tablesense.daemon.rules.uth import settle_uth
from tablesense.daemon.table.game import BURN, DEALER, Face, GameRound, LockedWager, Outcome, memo

__all__ = ["BOARD", "UthRound", "deal_sequence"]

BOARD = "board"
"""Position of the community cards."""


def deal_sequence(config: TableConfig, seats: Sequence[str]) -> tuple[tuple[str, Face], ...]:
    """The positions of a round's cards in draw order for ``seats`` (in seat order)."""
    u = config.uth
    players = [*seats, DEALER]
    hands = [p for p in players for _ in range(2)] if u.deal == "stacks" else players * 2
    board = [BURN] * u.burn_before_board + [BOARD] * 5
    order = board + hands if u.board == "before" else hands + board
    return tuple((p, Face.NEVER if p == BURN else Face.REVEAL) for p in order)


class UthRound(GameRound):
    """A UTH round with Ultimate Pairs."""

    game = "uth"

    def __init__(self, config: TableConfig, rules: Any, wagers: Sequence[LockedWager]) -> None:
        super().__init__(config, rules, wagers)
        ante = {w.seat for w in self.wagers if w.bet is Bet.ANTE}
        dealt = ante or {w.seat for w in self.wagers}
        self.seats: tuple[str, ...] = tuple(s for s in config.seats if s in dealt)
        self._sequence = deal_sequence(config, self.seats)
        self._ante = [w.for_rules(True) for w in self.wagers if w.bet is Bet.ANTE]

    def next_position(self) -> tuple[str, Face] | None:
        """The configured order; no card once it is dealt."""
        n = len(self.slots)
        return self._sequence[n] if n < len(self._sequence) else None

    @property
    def initial_deal_done(self) -> bool:
        """Every seat, the dealer and the board have their cards."""
        return len(self.slots) >= len(self._sequence)

    def _hands(self) -> dict[str, list[Card]]:
        return {p: self.cards_at(p) for p in (*self.seats, DEALER)}

    @memo
    def due(self) -> list[tuple[LockedWager, Settlement]]:
        """Ineligible wagers (returned) at once; the others at the reveal."""
        out: list[tuple[LockedWager, Settlement]] = []
        for w in self.settled_wagers():
            eligible = not self._ante or w.seat in self.seats
            if eligible and not self.revealed:
                continue
            hands = self._hands() if eligible else {}
            (settlement,) = settle_uth(hands, [*self._ante, w.for_rules(True)], self.rules)
            out.append((w, settlement))
        return out

    @memo
    def outcome(self, public: bool) -> Outcome:
        """Seats' two cards with their Ultimate Pairs line, the dealer's two and the board; before the
        reveal the public outcome is empty."""
        if public and not self.revealed:
            return Outcome()
        settled = {w.seat: s for w, s in self.due()} if self.revealed else {}
        boxes = tuple(BoxResult(position=p, cards=tuple(str(c) for c in self.cards_at(p)),
                                pair=settled[p].category if p in settled else None) for p in self.seats)
        return Outcome(boxes=boxes, dealer=tuple(str(c) for c in self.cards_at(DEALER)),
                       board=tuple(str(c) for c in self.cards_at(BOARD)))
