"""The shoe in play: inventory of cards out, start-of-shoe burn, cut card (rules.md §1.3).

Cards taken out are tracked against :class:`daemon.rules.cards.ShoeComposition`; an unreadable card
counts as out (``unknown_out``) until a supervisor enters it. Pure.
"""

from __future__ import annotations

from tablesense.daemon.config import BurnConfig
from tablesense.daemon.rules.cards import Card, CardNotInShoe, ShoeComposition
from tablesense.daemon.table.alarms import AlarmCode

__all__ = ["ShoeTracker", "burn_count_for"]


def burn_count_for(exposed: Card) -> int:
    """Cards burned after the exposed first card: its baccarat value, a 10 or face card burns 10
    (rules.md §1.3, common procedure; the exposed card itself is burned too)."""
    return exposed.rank.baccarat_value or 10


class ShoeTracker:
    """One shoe: its number, inventory, burn progress and cut card.

    Attributes:
        number: the shoe number on this table.
        burn_left: cards still to burn at the start of the shoe (``None``: waiting for the exposed
            card in ``face_value`` mode, or no burn).
        awaiting_exposed: ``face_value`` mode and the exposed card is not known yet.
        cut_card: the cut card came out.
        last_round: the round after which the shoe ends (set by the cut card).
        empty: the shoe reported empty.
    """

    def __init__(self, decks: int, number: int, burn: BurnConfig) -> None:
        self.number = number
        self.composition = ShoeComposition(decks)
        self.unknown_out = 0
        self.mode = burn.mode
        self.burn_left: int | None = burn.count if burn.mode == "fixed" else None
        self.awaiting_exposed = burn.mode == "face_value"
        self.exposed_unknown = False
        """``face_value`` mode and the exposed card was unreadable: the burn waits for ``enter_card``."""
        self.burned_while_unknown = 0
        self.cut_card = False
        self.last_round: int | None = None
        self.empty = False
        self.rounds_completed = 0
        """Rounds of this shoe completed (void ones included)."""

    @property
    def burning(self) -> bool:
        """True while the start-of-shoe burn is in progress."""
        return self.awaiting_exposed or self.exposed_unknown or bool(self.burn_left)

    @property
    def remaining(self) -> int:
        """Cards left (unreadable cards counted as out)."""
        return max(0, self.composition.remaining - self.unknown_out)

    @property
    def dealt(self) -> int:
        """Cards out of the shoe so far (burns included)."""
        return self.composition.size - self.remaining

    @property
    def penetration(self) -> float:
        """Fraction of the shoe out, four decimals (display only)."""
        return round(self.dealt / self.composition.size, 4)

    def take(self, card: Card) -> AlarmCode | None:
        """Take ``card`` out; return the alarm code when it cannot be (shoe unchanged)."""
        if self.remaining <= 0:
            return AlarmCode.SHOE_EXHAUSTED
        try:
            self.composition.take(card)
        except CardNotInShoe:
            return AlarmCode.CARD_NOT_IN_SHOE
        return None

    def take_unknown(self) -> AlarmCode | None:
        """Count an unreadable card as out; :attr:`AlarmCode.SHOE_EXHAUSTED` when none can be left."""
        if self.remaining <= 0:
            return AlarmCode.SHOE_EXHAUSTED
        self.unknown_out += 1
        return None

    def resolve_unknown(self, card: Card) -> AlarmCode | None:
        """An unreadable card turned out to be ``card``; return the code when the shoe cannot hold it."""
        try:
            self.composition.take(card)
        except CardNotInShoe:
            return AlarmCode.CARD_NOT_IN_SHOE
        self.unknown_out = max(0, self.unknown_out - 1)
        return None

    def burn_step(self, card: Card | None) -> None:
        """Advance the start-of-shoe burn by one card (the exposed card first in ``face_value`` mode)."""
        if self.awaiting_exposed:
            self.awaiting_exposed = False
            if card is None:
                self.exposed_unknown = True
            else:
                self.burn_left = burn_count_for(card)
        elif self.exposed_unknown:
            self.burned_while_unknown += 1
        elif self.burn_left:
            self.burn_left -= 1

    def enter_exposed(self, card: Card) -> None:
        """A supervisor entered the unreadable exposed card: the burn continues for the cards it calls
        for that have not come out yet."""
        self.exposed_unknown = False
        self.burn_left = max(0, burn_count_for(card) - self.burned_while_unknown)
        self.burned_while_unknown = 0
