"""Blackjack dealing (rules.md §2, PA pattern § 685a.7(e); hole card § 633a.1).

One card face up to each box holding a wager, in seat order from the dealer's left; the dealer's up
card; a second card to each box; the dealer's hole card (face down; not dealt on no-hole-card tables,
``[blackjack] hole_card = false``). Perfect Pairs is decided as soon as a box has its two cards
(Perfect Pairs rule sheet rule 8) by :func:`daemon.rules.blackjack.settle_blackjack`. Later cards
(hits, doubles, splits, dealer draws) are kept for the floor record only and never made public. The
round ends on the dealer's round-end button or the next no-more-bets (a round-end pressed while cards
wait behind a held card takes effect in its place among them; a no-more-bets pressed on a held round
waits, with the next coup's cards, until it is resolved: :mod:`daemon.table.machine`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import BoxResult
from tablesense.daemon.rules.blackjack import settle_blackjack
from tablesense.daemon.rules.pairs import classify_pair
from tablesense.daemon.rules.settlement import Bet, Settlement
from tablesense.daemon.table.game import DEALER, Face, GameRound, LockedWager, Outcome, memo

__all__ = ["PLAY", "BlackjackRound"]

PLAY = "play"
"""Position of cards after the initial deal (kept for the floor record only)."""


class BlackjackRound(GameRound):
    """A blackjack round with Perfect Pairs."""

    game = "blackjack"

    def __init__(self, config: TableConfig, rules: Any, wagers: Sequence[LockedWager]) -> None:
        super().__init__(config, rules, wagers)
        main = {w.seat for w in self.wagers if w.bet is Bet.BLACKJACK}
        boxed = main or {w.seat for w in self.wagers}
        self.boxes: tuple[str, ...] = tuple(s for s in config.seats if s in boxed)
        """Boxes dealt to, in seat order (boxes holding a blackjack wager when any is sensed)."""
        up = [(b, Face.UP) for b in self.boxes]
        seq = [*up, (DEALER, Face.UP), *up]
        if config.blackjack.hole_card:
            seq.append((DEALER, Face.NEVER))
        self._sequence: tuple[tuple[str, Face], ...] = tuple(seq)
        self._main = [w.for_rules(True) for w in self.wagers if w.bet is Bet.BLACKJACK]
        self._by_cards: dict[tuple[LockedWager, tuple[Any, ...] | None], Settlement] = {}
        """Each wager's settlement by the first two cards of its box (``None``: not eligible)."""

    def next_position(self) -> tuple[str, Face] | None:
        """The initial deal in order; afterwards every card is a play card until the round ends."""
        if self.ended:
            return None
        n = len(self.slots)
        return self._sequence[n] if n < len(self._sequence) else (PLAY, Face.NEVER)

    @property
    def initial_deal_done(self) -> bool:
        """Both cards to every box, the up card and (with a hole card) the hole card are out."""
        return len(self.slots) >= len(self._sequence)

    def _first_two(self, box: str) -> list[Any]:
        return [s.card for s in self.slots[:len(self._sequence)] if s.position == box][:2]

    @memo
    def due(self) -> list[tuple[LockedWager, Settlement]]:
        """Perfect Pairs: ineligible ones at once (returned), the others when their box has two cards."""
        out: list[tuple[LockedWager, Settlement]] = []
        for w in self.settled_wagers():
            cards = self._first_two(w.seat)
            eligible = not self._main or w.seat in self.boxes
            if eligible and (len(cards) < 2 or None in cards):
                continue
            key = (w, tuple(cards) if eligible else None)
            settlement = self._by_cards.get(key)
            if settlement is None:  # a box's first two cards decide it: later cards change nothing
                hands = {w.seat: cards} if eligible else {}
                (settlement,) = settle_blackjack(hands, [*self._main, w.for_rules(True)], self.rules)
                self._by_cards[key] = settlement
            out.append((w, settlement))
        return out

    @memo
    def outcome(self, public: bool) -> Outcome:
        """Boxes with their first two cards and pair result; the dealer's up card (and, in the floor
        record only, the hole card)."""
        boxes = []
        pp = {w.seat: w for w in self.settled_wagers()}
        for b in self.boxes:
            cards = [c for c in self._first_two(b) if c is not None]
            pair = None
            if len(cards) == 2:
                kind = classify_pair(cards[0], cards[1])
                pair = kind.value if kind else ("no_pair" if b in pp else None)
            boxes.append(BoxResult(position=b, cards=tuple(str(c) for c in cards), pair=pair))
        dealer = [s for s in self.slots[:len(self._sequence)] if s.position == DEALER and s.card is not None]
        shown = [s for s in dealer if s.face is Face.UP] if public else dealer
        return Outcome(boxes=tuple(boxes), dealer=tuple(str(s.card) for s in shown))
