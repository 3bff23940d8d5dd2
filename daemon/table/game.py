"""What every game's dealing module provides to the round state machine.

A :class:`GameRound` knows one game's card-to-position order, when each wager can be decided, and
which cards are face up. It holds the round's :class:`Slot` list (cards in draw order with their
position) and settles by calling the rules core (never duplicating it). The machine owns phases,
holds, alarms, the shoe inventory and the information barrier.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import BaccaratOutcome, BoxResult, WagerRecord
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.settlement import Bet, Hand, Settlement, Wager
from tablesense.daemon.rules.settlement import Outcome as WagerOutcome

__all__ = ["BURN", "DEALER", "TERM", "UNSETTLED_BETS", "Face", "GameRound", "LockedWager", "Outcome", "Slot",
           "memo"]

_R = TypeVar("_R")
TERM: dict[StrEnum, str] = {m: m.value for kind in (Bet, Hand, WagerOutcome) for m in kind}
"""A bet's, hand's or wager outcome's name (its ``value``, read from a dict: cheaper than the enum's)."""


def memo(method: Callable[..., _R]) -> Callable[..., _R]:
    """Keep what a :class:`GameRound` method returns until the round's cards change: a round's position,
    completeness, settlements and outcome are functions of its slots and of the round-end button alone,
    and :meth:`GameRound.place`, :meth:`GameRound.fill` and :meth:`GameRound.on_round_end` (the only
    ways either changes) forget every kept answer. The machine asks them several times per input."""
    name = method.__name__

    def kept(self: GameRound, *args: Any, **kwargs: Any) -> _R:
        key = (name, *args, *kwargs.items()) if kwargs else (name, *args) if args else name
        try:
            return self._memo[key]  # type: ignore[no-any-return]
        except KeyError:
            value = self._memo[key] = method(self, *args, **kwargs)
            return value

    kept.__name__, kept.__qualname__, kept.__doc__ = name, method.__qualname__, method.__doc__
    return kept

DEALER = "dealer"
"""Position name of the dealer's cards (blackjack, UTH)."""
BURN = "burn"
"""Position name of a card burned inside a round (UTH ``burn_before_board``)."""

UNSETTLED_BETS = frozenset({Bet.BLACKJACK, Bet.ANTE})
"""Wagers tablesense senses only for eligibility and never settles (Perfect Pairs rule sheet rule 2;
58 Pa. Code § 653b.5(a))."""


class Face(StrEnum):
    """When a card may appear on a public channel."""

    UP = "up"
    """Dealt face up: public at once."""
    REVEAL = "reveal"
    """Face down until the reveal (UTH hands and board)."""
    NEVER = "never"
    """Never public (the blackjack hole card, later blackjack cards, burn cards)."""


@dataclass(slots=True)
class Slot:
    """A card of the round at its position: ``card`` is ``None`` while unreadable (burn slots may stay
    ``None``)."""

    index: int
    position: str
    face: Face
    card: Card | None


@dataclass(frozen=True, slots=True)
class LockedWager:
    """A wager locked from the bet-pad snapshot: spot id, the config's seat/bet/hand, stake (minor units)."""

    spot: str
    seat: str
    bet: Bet
    hand: Hand | None
    stake: int
    presence_only: bool = False

    def for_rules(self, spot_is_seat: bool) -> Wager:
        """The rules-core :class:`Wager` (blackjack and UTH name the box/seat as the wager's spot)."""
        return Wager(self.seat if spot_is_seat else self.spot, self.bet, self.stake, self.hand)

    def record(self) -> WagerRecord:
        """The floor-record form."""
        return WagerRecord(spot=self.spot, seat=self.seat, bet=TERM[self.bet],
                           hand=TERM[self.hand] if self.hand else None, stake=self.stake,
                           presence_only=self.presence_only)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A round's results: the baccarat coup, per-box results, dealer cards and board (as strings)."""

    baccarat: BaccaratOutcome | None = None
    boxes: tuple[BoxResult, ...] = ()
    dealer: tuple[str, ...] = ()
    board: tuple[str, ...] = ()


class GameRound(ABC):
    """One round of one game, from lock to completion.

    Args:
        config: the table config.
        rules: the game's rules object (``config.rules()``).
        wagers: the locked wagers (every bet, including eligibility-only ones).
    """

    game: str = ""
    ends_by_button = True
    """The dealer's round-end (reveal) button ends the round (:meth:`on_round_end`); baccarat ends by
    its cards alone."""

    def __init__(self, config: TableConfig, rules: Any, wagers: Sequence[LockedWager]) -> None:
        self.config = config
        self.rules = rules
        self.wagers: tuple[LockedWager, ...] = tuple(wagers)
        self.slots: list[Slot] = []
        self.revealed = False
        self.ended = False
        self._memo: dict[Any, Any] = {}
        """Answers of :func:`memo` methods since the last change of the slots or of the button."""

    # --- dealing ---------------------------------------------------------------------------------

    @abstractmethod
    def next_position(self) -> tuple[str, Face] | None:
        """Where the next card goes and how it faces, or ``None`` when the rules call for no card.

        Only called while every dealt card is known (no unresolved unreadable card)."""

    @property
    @abstractmethod
    def initial_deal_done(self) -> bool:
        """True once the cards every wager needs have been dealt (the deal the rules prescribe)."""

    def place(self, index: int, card: Card | None) -> Slot:
        """Put the next card (``None``: unreadable) at :meth:`next_position`.

        Raises:
            ValueError: the rules call for no card (the machine checks first).
        """
        where = self.next_position()
        if where is None:
            raise ValueError("the rules call for no card")
        slot = Slot(index, where[0], where[1], card)
        self.slots.append(slot)
        self._memo.clear()
        return slot

    @memo
    def unresolved(self) -> Slot | None:
        """The first unreadable card not yet entered (burn slots never count)."""
        for s in self.slots:
            if s.card is None and s.position != BURN:
                return s
        return None

    def fill(self, card: Card) -> Slot:
        """Enter ``card`` for the first unreadable one.

        Raises:
            ValueError: no unreadable card is waiting.
        """
        slot = self.unresolved()
        if slot is None:
            raise ValueError("no unreadable card is waiting")
        slot.card = card
        self._memo.clear()
        return slot

    def cards_at(self, position: str) -> list[Card]:
        """Known cards at ``position`` in draw order."""
        return [s.card for s in self.slots if s.position == position and s.card is not None]

    # --- settling --------------------------------------------------------------------------------

    @abstractmethod
    def due(self) -> list[tuple[LockedWager, Settlement]]:
        """Every settlement decidable now (including ones already settled; the machine keeps each
        wager's first). Only called when no card is unresolved."""

    def complete(self) -> bool:
        """True when the round is over by the cards alone (baccarat), or after the dealer's button."""
        return self.ended

    def on_round_end(self) -> bool:
        """The dealer's round-end/reveal button: True when it applies now (then :meth:`complete`)."""
        if not self.initial_deal_done:
            return False
        self.revealed = True
        self.ended = True
        self._memo.clear()
        return True

    @memo
    def public_cards(self, build: Callable[[GameRound], _R]) -> _R:
        """What ``build(self)`` returns (:func:`daemon.table.barrier.public_cards`: the information
        barrier builds the public cards, the round keeps them until its cards change)."""
        return build(self)

    @memo
    def settled_wagers(self) -> tuple[LockedWager, ...]:
        """The wagers tablesense settles (not the eligibility-only blackjack and ante wagers)."""
        return tuple(w for w in self.wagers if w.bet not in UNSETTLED_BETS)

    @abstractmethod
    def outcome(self, public: bool) -> Outcome:
        """The results; ``public`` leaves out every card signage may not see."""
