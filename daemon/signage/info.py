"""The public table-info message: which wagers the table offers, their paytables and limits, its seats.

Built from a validated :class:`daemon.config.TableConfig` (pure; no I/O, no clock). The round state
machine publishes it retained on ``{prefix}/{table}/info`` at start and at every new shoe
(:func:`table_info_message`, a :class:`daemon.messages.TableInfo`); ``tablesense signage --config``
can show it without a daemon (:func:`table_info`, the same payload as a dict). Shape (JSON, schema
``tablesense.table_info``, docs/schemas/tablesense.table_info.json, see docs/signage.md)::

    {"schema": "tablesense.table_info", "version": 1, "table": "bac-01", "game": "baccarat", "decks": 8,
     "currency": "EUR", "minor_unit": 2, "commission": "5%",
     "wagers": [{"bet": "perfect_pairs", "label": "Perfect Pairs", "paytable_name": "A",
                 "paytable": [{"category": "perfect_pair", "label": "Perfect Pair", "odds": "25 to 1"}, ...],
                 "min": 500, "max": 20000}, ...],
     "main_wagers": [{"bet": "player", "label": "Player", "min": 1000, "max": 500000, ...}, ...],
     "seats": ["1", ...], "spots": [{"spot": "1", "seat": "1", "bet": "player", "hand": null}, ...], ...}

Odds come from the rules core: Perfect Pairs (58 Pa. Code § 627c.1(d); blackjack: seed 001 rule 7),
Ultimate Pairs (§ 653b.5(f)), Tie, Dragon 7 and Panda 8 (§ 631a.8, rules.md §1.7). Other wagers list
their paytable's name only. Money (``min``/``max``) is integer minor units. Main wagers (Player,
Banker, blackjack, Ante) are listed apart in ``main_wagers``. Nothing private: no devices, broker,
journal or credentials.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import PaytableLine, SpotInfo, TableInfo, WagerInfo
from tablesense.daemon.rules.baccarat_wagers import DRAGON_7_ODDS, PANDA_8_ODDS, lookup_tie
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.pairs import (
    BACCARAT_PERFECT_PAIRS,
    BLACKJACK_PERFECT_PAIRS,
    PairKind,
    lookup_paytable,
)
from tablesense.daemon.rules.uth import DEFAULT_ULTIMATE_PAIRS, ULTIMATE_PAIRS
from tablesense.daemon.signage.view import BET_LABELS, category_label

__all__ = ["MAIN_WAGERS", "TABLE_INFO_SCHEMA", "table_info", "table_info_message"]

TABLE_INFO_SCHEMA = "tablesense.table_info"
"""Schema name of :class:`daemon.messages.TableInfo`."""
MAIN_WAGERS = frozenset({"player", "banker", "blackjack", "ante"})
"""Main wagers: listed in ``main_wagers``, not in the side-wager panel's ``wagers``."""


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


def table_info_message(cfg: TableConfig, *, ts: str, shoe: int | None = None) -> TableInfo:
    """The :class:`~daemon.messages.TableInfo` message for ``cfg`` (shape in the module doc).

    ``ts`` is the ISO-8601 time of the input that caused it (this module reads no clock); ``shoe`` the
    shoe in play. A paytable the rules core does not know (the config was not validated) is listed by
    name only. Never raises for a parsed config.
    """
    side: list[WagerInfo] = []
    main: list[WagerInfo] = []
    for bet, w in cfg.wagers.items():
        label = BET_LABELS.get(bet, category_label(bet))
        if bet in MAIN_WAGERS:
            main.append(WagerInfo(bet=bet, label=label, paytable_name=w.paytable, min=w.min, max=w.max))
            continue
        try:
            lines = _lines(cfg.game, bet, w.paytable, cfg.shoe_decks)
        except (RulesError, KeyError, ValueError):
            lines = [{"category": "paytable", "label": "Paytable", "odds": str(w.paytable)}
                     ] if w.paytable else []
        side.append(WagerInfo(bet=bet, label=label, paytable_name=w.paytable,
                              paytable=tuple(PaytableLine(**line) for line in lines), min=w.min, max=w.max))
    commission = None
    if cfg.game == "baccarat":
        commission = cfg.commission.rate if cfg.commission is not None else "5%"
    spots = tuple(SpotInfo(spot=spot, seat=s.seat, bet=s.bet, hand=s.hand) for spot, s in cfg.spots.items())
    return TableInfo(table=cfg.table, ts=ts, shoe=shoe, game=cfg.game, decks=cfg.shoe_decks,
                     currency=cfg.currency, minor_unit=cfg.minor_unit, wagers=tuple(side),
                     main_wagers=tuple(main), commission=commission, seats=tuple(cfg.seats), spots=spots)


def table_info(cfg: TableConfig) -> dict[str, Any]:
    """The ``tablesense.table_info`` payload for ``cfg`` as a JSON-ready dict (what
    ``tablesense signage --config`` shows before the daemon's retained message arrives)."""
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(table_info_message(cfg, ts="")))
    return result  # through JSON: lists, not tuples, exactly as a subscriber receives it
