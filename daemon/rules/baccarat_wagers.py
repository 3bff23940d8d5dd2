"""Baccarat paytables as data: Tie, Dragon Bonus, House Money, and the EZ Baccarat insurance wagers.

The Perfect Pairs paytables live in :mod:`daemon.rules.pairs` (they are shared with blackjack).

Sources:
    * 58 Pa. Code § 631a.8(a)(3)-(7): which events win, lose or tie each wager.
    * rules.md §1.7 (secondary sources, PA payout section § 631a.13 not in the seeds): Tie 8 to 1 or
      9 to 1; Dragon Bonus natural win 1 to 1, win by 9/8/7/6/5/4 pays 30/10/6/4/2/1; Dragon 7 40 to 1;
      Panda 8 25 to 1; House Money 3 to 1 for one pair, 15 to 1 for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tablesense.daemon.rules.money import Odds
from tablesense.daemon.rules.pairs import PaytableNotAllowed

__all__ = [
    "DRAGON_7_ODDS",
    "DRAGON_BONUS_PAYTABLES",
    "HOUSE_MONEY_PAYTABLES",
    "PANDA_8_ODDS",
    "TIE_ODDS",
    "DragonBonusPaytable",
    "HouseMoneyPaytable",
    "lookup_dragon_bonus",
    "lookup_fixed_odds",
    "lookup_house_money",
    "lookup_tie",
]

TIE_ODDS: tuple[Odds, ...] = (Odds(8), Odds(9))
"""The Tie odds a table may choose: 8 to 1 (default) or 9 to 1 (rules.md §1.7; § 631a.8(a)(3))."""

DRAGON_7_ODDS = Odds(40)
"""EZ Baccarat Dragon 7 wager odds, 40 to 1 (§ 631a.8(a)(5); odds per rules.md §1.7)."""

PANDA_8_ODDS = Odds(25)
"""EZ Baccarat Panda 8 wager odds, 25 to 1 (§ 631a.8(a)(6); odds per rules.md §1.7)."""


@dataclass(frozen=True, slots=True)
class DragonBonusPaytable:
    """A Dragon Bonus paytable (58 Pa. Code § 631a.8(a)(4)).

    Attributes:
        name: the paytable's name (``standard``).
        natural_win: odds for a Natural that wins (incl. a Natural 9 against a Natural 8).
        win_by: odds for a non-natural win by 9, 8, 7, 6, 5 and 4 points, in that order.
        source: where the paytable comes from.

    A Natural tie pushes; a non-natural win by 1 to 3 points, any non-natural tie and any loss lose.
    """

    name: str
    natural_win: Odds
    win_by: tuple[Odds, Odds, Odds, Odds, Odds, Odds]
    source: str

    def odds_for_margin(self, margin: int) -> Odds | None:
        """Odds for a non-natural win by ``margin`` points (1..9), ``None`` below 4 (a losing margin)."""
        if not 1 <= margin <= 9:
            raise ValueError(f"a winning margin is 1 to 9 points, got {margin}")
        return self.win_by[9 - margin] if margin >= 4 else None


def _db(name: str, win_by: tuple[int, int, int, int, int, int], source: str) -> DragonBonusPaytable:
    a, b, c, d, e, f = win_by
    return DragonBonusPaytable(name, Odds(1), (Odds(a), Odds(b), Odds(c), Odds(d), Odds(e), Odds(f)), source)


DRAGON_BONUS_PAYTABLES: dict[str, DragonBonusPaytable] = {
    "standard": _db("standard", (30, 10, 6, 4, 2, 1),
                    "58 Pa. Code § 631a.8(a)(4); odds per rules.md §1.7 (WoO side bets; Rivers Des Plaines)"),
    "30-10-4-4-2-2": _db("30-10-4-4-2-2", (30, 10, 4, 4, 2, 2),
                         "58 Pa. Code § 631a.8(a)(4); alternative table per rules.md §1.7 (Cypress Bayou)"),
}
"""Dragon Bonus paytables by name; ``standard`` (alias ``30-10-6-4-2-1``) is the default."""
DRAGON_BONUS_PAYTABLES["30-10-6-4-2-1"] = DRAGON_BONUS_PAYTABLES["standard"]


@dataclass(frozen=True, slots=True)
class HouseMoneyPaytable:
    """A House Money paytable (58 Pa. Code § 631a.8(a)(7)): odds for one pair and for both hands paired."""

    name: str
    one_pair: Odds
    both_pairs: Odds
    source: str


HOUSE_MONEY_PAYTABLES: dict[str, HouseMoneyPaytable] = {
    "3-15": HouseMoneyPaytable("3-15", Odds(3), Odds(15),
                               "58 Pa. Code § 631a.8(a)(7); odds per rules.md §1.7 (TribLive 2012, vendor)"),
}
"""House Money paytables by name; ``3-15`` (alias ``standard``) is the default. Any ``N-M`` name with
N < M is accepted as a table-chosen "N to 1 one pair, M to 1 both" (the odds are configurable)."""
HOUSE_MONEY_PAYTABLES["standard"] = HOUSE_MONEY_PAYTABLES["3-15"]


def lookup_tie(name: str) -> Odds:
    """The Tie odds named ``name`` (``"8-1"``, ``"9 to 1"``, ``"8"``).

    Raises:
        PaytableNotAllowed: not odds, or odds other than 8 to 1 and 9 to 1 (one-line message).
    """
    try:
        odds = Odds.parse(str(name))
    except ValueError:
        odds = None
    if odds is None or odds not in TIE_ODDS:
        raise PaytableNotAllowed(f"tie: unknown paytable {name!r} (choose 8-1 or 9-1)")
    return odds


def lookup_dragon_bonus(name: str) -> DragonBonusPaytable:
    """The Dragon Bonus paytable named ``name``.

    Raises:
        PaytableNotAllowed: unknown name (one-line message).
    """
    pt = DRAGON_BONUS_PAYTABLES.get(str(name).strip().lower())
    if pt is None:
        raise PaytableNotAllowed(f"dragon_bonus: unknown paytable {name!r} "
                                 f"(choose one of {', '.join(DRAGON_BONUS_PAYTABLES)})")
    return pt


def lookup_house_money(name: str) -> HouseMoneyPaytable:
    """The House Money paytable named ``name``: ``3-15``/``standard``, or any ``N-M`` (N to 1 for one
    pair, M to 1 for both, 1 <= N < M <= 1000).

    Raises:
        PaytableNotAllowed: anything else (one-line message).
    """
    key = str(name).strip().lower()
    pt = HOUSE_MONEY_PAYTABLES.get(key)
    if pt is not None:
        return pt
    m = re.fullmatch(r"(\d{1,4})\s*-\s*(\d{1,4})", key)
    if m:
        one, both = int(m.group(1)), int(m.group(2))
        if 1 <= one < both <= 1000:
            return HouseMoneyPaytable(f"{one}-{both}", Odds(one), Odds(both),
                                      "58 Pa. Code § 631a.8(a)(7); odds chosen in the Rules Submission")
    raise PaytableNotAllowed(f"house_money: unknown paytable {name!r} "
                             "(give 'ONE-BOTH' odds, e.g. 3-15, with ONE below BOTH)")


def lookup_fixed_odds(bet: str, name: str, odds: Odds) -> Odds:
    """Check a paytable name for a wager with one fixed set of odds (Dragon 7, Panda 8).

    Raises:
        PaytableNotAllowed: ``name`` is not those odds (one-line message).
    """
    try:
        given = Odds.parse(str(name))
    except ValueError:
        given = None
    if given != odds:
        raise PaytableNotAllowed(f"{bet}: unknown paytable {name!r} (only {odds.pays}-{odds.per})")
    return odds
