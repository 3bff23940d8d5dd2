"""Odds as exact rationals, winnings in integer minor units, and commission rounding.

Money is always an ``int`` number of minor units (cents). Odds "25 to 1" are kept as two integers.
Commission on a Banker win (58 Pa. Code § 631a.8(a)(1); rules.md §1.7: 5 % of the amount won) is
computed as an exact :class:`fractions.Fraction` and only then rounded to whole minor units by a
:class:`CommissionRule`, so no float ever touches a payout.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any

__all__ = ["MAX_AMOUNT", "CommissionRule", "Odds", "RoundingMode", "max_stake", "percent_text",
           "round_to_unit", "wager_odds", "winnings"]

MAX_AMOUNT = (1 << 53) - 1
"""The largest amount (minor units) tablesense publishes: 2**53 - 1, the largest integer every JSON
consumer reads exactly (JavaScript and other IEEE-754 double readers, RFC 8259 §6). Stakes are bounded by
:func:`max_stake` so that no stake, win or net ever exceeds it."""


@dataclass(frozen=True, slots=True)
class Odds:
    """Payout odds "``pays`` to ``per``" (e.g. 25 to 1): a winning stake S wins S·pays/per.

    Raises:
        ValueError: a negative ``pays`` or a ``per`` below 1.
    """

    pays: int
    per: int = 1

    def __post_init__(self) -> None:
        if self.pays < 0 or self.per < 1:
            raise ValueError(f"odds must be N to M with N >= 0 and M >= 1, got {self.pays} to {self.per}")

    @classmethod
    def parse(cls, text: str) -> Odds:
        """Read ``"25 to 1"``, ``"25:1"``, ``"25-1"`` or ``"25"``; raise ``ValueError`` otherwise."""
        m = re.fullmatch(r"\s*(\d{1,6})\s*(?:(?:to|:|-|/)\s*(\d{1,6}))?\s*", text)
        if not m:
            raise ValueError(f"not odds: {text!r} (expected e.g. '25 to 1')")
        return cls(int(m.group(1)), int(m.group(2) or 1))

    @property
    def ratio(self) -> Fraction:
        """Winnings per unit staked, exactly."""
        return Fraction(self.pays, self.per)

    def __str__(self) -> str:
        return f"{self.pays} to {self.per}"


def winnings(stake: int, odds: Odds) -> int:
    """Winnings (excluding the returned stake) on ``stake`` minor units at ``odds``.

    Casinos pay in whole minor units: a fractional result (only possible for odds like 3 to 2) is
    rounded down, the house never pays a fraction of a cent.

    Raises:
        TypeError: ``stake`` is not an ``int``.
        ValueError: ``stake`` is negative.
    """
    _check_stake(stake)
    return stake * odds.pays // odds.per


def _check_stake(stake: int) -> None:
    if not isinstance(stake, int) or isinstance(stake, bool):
        raise TypeError(f"stake must be integer minor units, got {type(stake).__name__}")
    if stake < 0:
        raise ValueError(f"stake must not be negative, got {stake}")


def max_stake(odds: Iterable[Odds | Fraction | None]) -> int:
    """The largest stake (minor units) whose every published amount stays exact in JSON: the stake
    itself and its winnings at the largest of ``odds`` are at most :data:`MAX_AMOUNT` (a net loss is
    minus the stake; commission is less than the win). ``None`` entries (no win) are ignored.

    >>> max_stake([Odds(25)])  # Perfect Pairs paytable A's largest line
    360287970189639
    """
    ratio = max((o.ratio if isinstance(o, Odds) else Fraction(o) for o in odds if o is not None),
                default=Fraction(0))
    if ratio <= 1:
        return MAX_AMOUNT
    return MAX_AMOUNT * ratio.denominator // ratio.numerator


def wager_odds(game: str, rules: Any) -> dict[str, Fraction]:
    """The largest odds each wager of ``game`` pays under ``rules`` (the paytables in force), as
    ``{bet name: winnings per unit staked}`` (0 for a wager that never wins more than its stake back,
    e.g. a blackjack wager tablesense does not settle). Read from the game's exact analysis, which lists
    every way each wager can end with its odds (:meth:`daemon.rules.games.Game.analyze`).

    Raises:
        daemon.rules.games.UnknownGame: ``game`` is not a game tablesense settles.
    """
    from tablesense.daemon.rules.games import get_game  # the games import this module

    out: dict[str, Fraction] = {}
    for analysis in get_game(game).analyze(rules):
        best = max((o.odds.ratio for o in analysis.outcomes if o.odds is not None), default=Fraction(0))
        out[analysis.bet.value] = max(out.get(analysis.bet.value, Fraction(0)), best)
    return out


class RoundingMode(Enum):
    """How an exact amount is brought to a multiple of the rounding unit."""

    HALF_UP = "half_up"
    """To the nearest unit, halves away from zero (default)."""
    UP = "up"
    """Always up (in the house's favour for commission)."""
    DOWN = "down"
    """Always down (in the player's favour for commission)."""
    HALF_EVEN = "half_even"
    """To the nearest unit, halves to the even multiple."""


def round_to_unit(amount: Fraction, unit: int, mode: RoundingMode) -> int:
    """Round a non-negative exact ``amount`` (minor units) to a multiple of ``unit`` minor units."""
    if unit < 1:
        raise ValueError(f"rounding unit must be >= 1 minor unit, got {unit}")
    q = amount / unit
    floor = q.numerator // q.denominator
    rest = q - floor
    if rest == 0 or mode is RoundingMode.DOWN:
        n = floor
    elif mode is RoundingMode.UP or rest > Fraction(1, 2):
        n = floor + 1
    elif rest < Fraction(1, 2):
        n = floor
    elif mode is RoundingMode.HALF_UP:
        n = floor + 1
    else:
        n = floor + (floor % 2)
    return n * unit


@dataclass(frozen=True, slots=True)
class CommissionRule:
    """Commission charged on a winning Banker wager (rules.md §1.7; 58 Pa. Code § 631a.13 vigorish).

    Attributes:
        rate: exact fraction of the amount won, default 5/100.
        unit: rounding unit in minor units (1 = cent, 25 = quarter).
        mode: rounding direction.
    """

    rate: Fraction = Fraction(5, 100)
    unit: int = 1
    mode: RoundingMode = RoundingMode.HALF_UP

    def __post_init__(self) -> None:
        if not 0 <= self.rate < 1:
            raise ValueError(f"commission rate must be in [0, 1), got {self.rate}")
        if self.unit < 1:
            raise ValueError(f"commission rounding unit must be >= 1, got {self.unit}")

    @classmethod
    def parse_rate(cls, text: str | int | float) -> Fraction:
        """Read a rate such as ``"5%"``, ``"0.05"``, ``"1/20"`` or ``5`` (percent) as an exact fraction."""
        s = str(text).strip()
        if s.endswith("%"):
            return Fraction(s[:-1].strip()) / 100
        value = Fraction(s)
        return value / 100 if value >= 1 else value

    def commission(self, won: int) -> int:
        """Commission in minor units on ``won`` minor units of winnings (exact, then rounded).

        Rounding up to a coarse unit never takes more than was won: on a 1-cent win with a
        25-cent unit rounded up, the commission is the 1 cent, so a winning wager never nets a loss.
        """
        _check_stake(won)
        return min(won, round_to_unit(self.rate * won, self.unit, self.mode))


def percent_text(rate: Fraction) -> str:
    """A rate as players read it: ``1/20`` -> ``"5%"``, ``1/40`` -> ``"2.5%"``; a rate with no short
    decimal form stays a fraction (``"1/30"``). Exact: no float. Used for the commission rule on the
    signage ``info`` message and by ``tablesense settle``."""
    pct = rate * 100
    for places in range(7):
        scaled = pct * 10**places
        if scaled.denominator == 1:
            digits = str(scaled.numerator).rjust(places + 1, "0")
            return (f"{digits[:-places]}.{digits[-places:]}" if places else digits) + "%"
    return str(rate)


NO_COMMISSION = CommissionRule(rate=Fraction(0))
"""EZ Baccarat takes no commission (58 Pa. Code § 627a.1, "EZ Baccarat")."""
