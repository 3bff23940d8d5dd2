"""Wagers and settled wagers: the shapes every game module settles into.

A :class:`Wager` is a stake in minor units on one bet at one spot; a :class:`Settlement` is its
outcome with the odds paid and the signed net amount for the player (commission already deducted).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tablesense.daemon.rules.money import Odds, winnings

__all__ = ["Bet", "Hand", "Outcome", "Settlement", "Wager", "settle_as"]


class Bet(StrEnum):
    """Every wager tablesense settles, by its field name."""

    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    DRAGON_BONUS = "dragon_bonus"
    DRAGON_7 = "dragon_7"
    PANDA_8 = "panda_8"
    PERFECT_PAIRS = "perfect_pairs"
    HOUSE_MONEY = "house_money"
    ULTIMATE_PAIRS = "ultimate_pairs"
    BLACKJACK = "blackjack"
    """The main blackjack wager on a box (not settled by tablesense; it makes Perfect Pairs eligible)."""
    ANTE = "ante"
    """The UTH Ante/Blind (not settled by tablesense; it makes Ultimate Pairs eligible, § 653b.5(a))."""


class Hand(StrEnum):
    """The baccarat hand a wager names (Perfect Pairs and Dragon Bonus are placed on one hand)."""

    PLAYER = "player"
    BANKER = "banker"


class Outcome(StrEnum):
    """How a wager ended. ``void`` means the round was voided and the stake returned."""

    WIN = "win"
    LOSE = "lose"
    PUSH = "push"
    VOID = "void"


@dataclass(frozen=True, slots=True)
class Wager:
    """A stake of ``stake`` minor units on ``bet`` at betting spot ``spot`` (and baccarat ``hand``)."""

    spot: str
    bet: Bet
    stake: int
    hand: Hand | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stake, int) or isinstance(self.stake, bool) or self.stake <= 0:
            raise ValueError(f"spot {self.spot}: stake must be a positive integer of minor units, "
                             f"got {self.stake!r}")


@dataclass(frozen=True, slots=True)
class Settlement:
    """A settled wager.

    Attributes:
        outcome: win, lose, push or void.
        category: what decided it (``perfect_pair``, ``natural_win``, ``win_by_6``, ``dragon_7`` ...).
        odds: the odds paid on a win, else ``None``.
        net: signed minor units for the player: winnings less commission on a win, ``-stake`` on a
            loss, 0 on a push or void.
        commission: minor units of commission deducted from ``net`` (Banker wins only).
    """

    wager: Wager
    outcome: Outcome
    category: str
    odds: Odds | None
    net: int
    commission: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping: spot, bet, hand, stake, outcome, category, odds, net, commission."""
        return {
            "spot": self.wager.spot,
            "bet": self.wager.bet.value,
            "hand": self.wager.hand.value if self.wager.hand else None,
            "stake": self.wager.stake,
            "outcome": self.outcome.value,
            "category": self.category,
            "odds": str(self.odds) if self.odds else None,
            "net": self.net,
            "commission": self.commission,
        }


def settle_as(wager: Wager, outcome: Outcome, category: str, odds: Odds | None = None,
              commission: int = 0) -> Settlement:
    """Build the :class:`Settlement` of ``wager`` for ``outcome``, computing ``net`` exactly.

    Raises:
        ValueError: a win without odds.
    """
    if outcome is Outcome.WIN:
        if odds is None:
            raise ValueError("a winning settlement needs odds")
        net = winnings(wager.stake, odds) - commission
    elif outcome is Outcome.LOSE:
        net, odds, commission = -wager.stake, None, 0
    else:
        net, odds, commission = 0, None, 0
    return Settlement(wager, outcome, category, odds, net, commission)
