"""The exact house edge of a wager under a table's decks and paytables, from the exact analyser.

The table's retained ``info`` message (:class:`tablesense.daemon.messages.TableInfo`) names the game,
the decks, each wager's paytable and the Banker commission; :func:`house_edge` rebuilds the rules from
them (:meth:`tablesense.daemon.rules.games.Game.rules`) and takes the wager's house edge from the same
exact enumeration ``tablesense analyze`` prints (:meth:`~tablesense.daemon.rules.games.Game.analyze`,
rules.md §0 counting). Results are cached per rule set (the analysis is pure).
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import lru_cache

from tablesense.daemon.config import RATE_TEXT
from tablesense.daemon.rules.analysis import WagerAnalysis
from tablesense.daemon.rules.games import get_game
from tablesense.daemon.rules.money import CommissionRule

__all__ = ["house_edge", "paytables_json"]


def paytables_json(paytables: dict[str, str]) -> str:
    """The canonical text of a ``{bet: paytable name}`` map (sorted keys), as the ``tables`` row keeps it."""
    return json.dumps(paytables, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=64)
def _analyses(game: str, decks: int, paytables: str, commission: str | None) -> tuple[WagerAnalysis, ...]:
    g = get_game(game)
    rule = (CommissionRule(CommissionRule.parse_rate(commission)) if commission and g.takes_commission
            else None)
    rules = g.rules(decks, json.loads(paytables) or None, rule)
    return tuple(g.analyze(rules))


def house_edge(game: str | None, decks: int | None, paytables: str | None, commission: str | None,
               bet: str, hand: str | None) -> tuple[str, Fraction] | None:
    """``(paytable, edge)`` of ``bet`` (on ``hand``) for the table's rules, or ``None`` when unknown.

    ``paytables``: :func:`paytables_json` text; ``commission``: e.g. ``"5%"`` (baccarat) or ``None``.
    ``edge`` is the exact house edge per unit staked (a :class:`~fractions.Fraction`); ``paytable`` the
    analyser's name for the paytable in force (e.g. ``"A"``, ``"1 to 1 less 5% commission"``). ``None``
    when the game, decks or wager is unknown, the commission is not a rate as a config writes it
    (:data:`tablesense.daemon.config.RATE_TEXT`) or the rules cannot be built (never raises).
    """
    if not game or not decks:
        return None
    if commission is not None and not RATE_TEXT.fullmatch(commission):
        return None  # '1e999999999' would build a billion-digit integer (the floor hung)
    try:
        analyses = _analyses(game, int(decks), paytables or "{}", commission)
    except (ValueError, KeyError, TypeError, ZeroDivisionError):  # RulesError is a ValueError
        return None
    for a in analyses:
        if a.bet.value == bet and (a.hand.value if a.hand else None) == (hand or None):
            return a.paytable, a.house_edge
    for a in analyses:  # a wager analysed without a hand (Tie, House Money) placed on a hand's spot
        if a.bet.value == bet and a.hand is None:
            return a.paytable, a.house_edge
    return None
