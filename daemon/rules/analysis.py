"""Shapes of an exact wager analysis: each outcome's probability, the expected return, the house edge.

The figures are computed by the game modules by exact enumeration through the same functions that
settle wagers (rules.md §0 gives the counting conventions). Probabilities are :class:`Fraction`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome

__all__ = ["OutcomeProbability", "WagerAnalysis"]


@dataclass(frozen=True, slots=True)
class OutcomeProbability:
    """One way a wager can end.

    Attributes:
        category: as in a settlement (``perfect_pair``, ``win_by_9``, ``lose`` ...).
        outcome: win, lose or push.
        odds: odds paid on a win, else ``None``.
        probability: exact probability.
        net_per_unit: exact net result per unit staked (e.g. 19/20 for a Banker win at 5 %
            commission, -1 for a loss, 0 for a push).
    """

    category: str
    outcome: Outcome
    odds: Odds | None
    probability: Fraction
    net_per_unit: Fraction


@dataclass(frozen=True, slots=True)
class WagerAnalysis:
    """The exact analysis of one wager (``bet`` on ``hand``) under ``paytable``."""

    bet: Bet
    hand: Hand | None
    paytable: str
    outcomes: tuple[OutcomeProbability, ...]

    @property
    def expected_return(self) -> Fraction:
        """Exact expected net result per unit staked (negative when the house has the edge)."""
        return sum((o.probability * o.net_per_unit for o in self.outcomes), Fraction(0))

    @property
    def house_edge(self) -> Fraction:
        """Exact house edge per unit staked: minus the expected return."""
        return -self.expected_return

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: bet, hand, paytable, outcomes (category, odds, probability and the exact
        fraction as a string), expected_return and house_edge (rounded to 6 decimals for display; the
        exact fractions are given as ``*_exact`` strings)."""
        return {
            "bet": self.bet.value,
            "hand": self.hand.value if self.hand else None,
            "paytable": self.paytable,
            "outcomes": [
                {"category": o.category, "outcome": o.outcome.value,
                 "odds": str(o.odds) if o.odds else None,
                 "probability": round(float(o.probability), 9),
                 "fraction": f"{o.probability.numerator}/{o.probability.denominator}"}
                for o in self.outcomes
            ],
            "expected_return": round(float(self.expected_return), 6),
            "house_edge": round(float(self.house_edge), 6),
            "expected_return_exact": str(self.expected_return),
            "house_edge_exact": str(self.house_edge),
        }
