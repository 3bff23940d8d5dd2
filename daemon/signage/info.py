"""The public table-info message: which side wagers the table offers, their paytables and limits.

Built from a validated :class:`daemon.config.TableConfig` (pure; no I/O). ``tablesense signage --config``
shows it; a daemon may also publish it retained on ``{prefix}/{table}/info`` so every display gets it.
Shape (JSON, schema ``tablesense.table_info``, see docs/signage.md)::

    {"schema": "tablesense.table_info", "version": 1, "table": "bac-01", "game": "baccarat",
     "currency": "EUR", "minor_unit": 2,
     "wagers": [{"bet": "perfect_pairs", "label": "Perfect Pairs", "paytable_name": "A",
                 "paytable": [{"category": "perfect_pair", "label": "Perfect Pair", "odds": "25 to 1"}, ...],
                 "min": 500, "max": 20000}, ...]}

Odds come from the rules core: Perfect Pairs (58 Pa. Code § 627c.1(d); blackjack: seed 001 rule 7),
Ultimate Pairs (§ 653b.5(f)), Tie, Dragon 7 and Panda 8 (§ 631a.8, rules.md §1.7). Other wagers list
their paytable's name only. Money (``min``/``max``) is integer minor units. Main wagers (Player,
Banker, blackjack, Ante) are left out.
"""

from __future__ import annotations

from typing import Any

from daemon.config import TableConfig
from daemon.rules.baccarat_wagers import DRAGON_7_ODDS, PANDA_8_ODDS, lookup_tie
from daemon.rules.errors import RulesError
from daemon.rules.pairs import BACCARAT_PERFECT_PAIRS, BLACKJACK_PERFECT_PAIRS, PairKind, lookup_paytable
from daemon.rules.uth import DEFAULT_ULTIMATE_PAIRS, ULTIMATE_PAIRS
from daemon.signage.view import BET_LABELS, category_label

__all__ = ["TABLE_INFO_SCHEMA", "table_info"]

TABLE_INFO_SCHEMA = "tablesense.table_info"
MAIN_WAGERS = frozenset({"player", "banker", "blackjack", "ante"})


def _lines(game: str, bet: str, paytable: str | None, decks: int) -> list[dict[str, str]]:
    if bet == "perfect_pairs":
        table = BLACKJACK_PERFECT_PAIRS if game == "blackjack" else BACCARAT_PERFECT_PAIRS
        name = paytable or ("25-12-6" if game == "blackjack" else "A")
        pt = lookup_paytable(table, name, decks, bet)
        return [{"category": k.value, "label": category_label(k.value), "odds": str(pt.odds(k))}
                for k in (PairKind.PERFECT, PairKind.COLORED, PairKind.MIXED)]
    if bet == "ultimate_pairs":
        up = ULTIMATE_PAIRS[(paytable or DEFAULT_ULTIMATE_PAIRS).upper()]
        return [{"category": line, "label": category_label(line), "odds": str(up.odds(line))}
                for line in up.offered_lines]
    if bet in ("dragon_7", "panda_8"):
        odds = DRAGON_7_ODDS if bet == "dragon_7" else PANDA_8_ODDS
        return [{"category": bet, "label": BET_LABELS[bet], "odds": str(odds)}]
    if bet == "tie" and paytable:
        return [{"category": "tie", "label": "Tie", "odds": str(lookup_tie(paytable))}]
    if paytable:
        return [{"category": "paytable", "label": "Paytable", "odds": paytable}]
    return []


def table_info(cfg: TableConfig) -> dict[str, Any]:
    """The ``tablesense.table_info`` payload for ``cfg`` (JSON-ready dict, shape in the module doc).

    A paytable the rules core does not know (the config was not validated) is listed by name only.
    """
    wagers = []
    for bet, w in cfg.wagers.items():
        if bet in MAIN_WAGERS:
            continue
        try:
            lines = _lines(cfg.game, bet, w.paytable, cfg.shoe_decks)
        except (RulesError, KeyError, ValueError):
            lines = [{"category": "paytable", "label": "Paytable", "odds": str(w.paytable)}
                     ] if w.paytable else []
        wagers.append({"bet": bet, "label": BET_LABELS.get(bet, category_label(bet)),
                       "paytable_name": w.paytable, "paytable": lines, "min": w.min, "max": w.max})
    return {"schema": TABLE_INFO_SCHEMA, "version": 1, "table": cfg.table, "game": cfg.game,
            "currency": cfg.currency, "minor_unit": cfg.minor_unit, "wagers": wagers}
