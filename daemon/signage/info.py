"""The public table-info message: which wagers the table offers, their odds lines and limits, the
commission rule, its seats and the displays' default language.

Built from a validated :class:`daemon.config.TableConfig` (pure; no I/O, no clock). The round state
machine publishes it retained on ``{prefix}/{table}/info`` at start and at every new shoe
(:func:`table_info_message`, a :class:`daemon.messages.TableInfo`); ``tablesense signage --config``
can show it without a daemon (:func:`table_info`, the same payload as a dict). Shape (JSON, schema
``tablesense.table_info``, docs/schemas/tablesense.table_info.json, see docs/signage.md)::

    {"schema": "tablesense.table_info", "version": 1, "table": "bac-01", "game": "baccarat", "decks": 8,
     "currency": "EUR", "minor_unit": 2, "commission": "5%",
     "commission_rule": {"rate": "5%", "unit": 1, "rounding": "half_up",
                         "text": "5% commission on Banker wins, rounded to the nearest €0.01"},
     "wagers": [{"bet": "perfect_pairs", "label": "Perfect Pairs", "paytable_name": "A",
                 "paytable": [{"category": "perfect_pair", "label": "Perfect Pair", "odds": "25 to 1"}, ...],
                 "min": 500, "max": 20000}, ...],
     "main_wagers": [{"bet": "player", "label": "Player",
                      "paytable": [{"category": "player_win", "label": "Player wins", "odds": "1 to 1"}],
                      "min": 1000, "max": 500000, ...}, ...],
     "seats": ["1", ...], "spots": [{"spot": "1", "seat": "1", "bet": "player", "hand": null}, ...],
     "language": "en", ...}

Every odds line comes from the table's rules object (:meth:`TableConfig.rules`), so a wager whose
paytable the config leaves at its default lists the default's odds: Perfect Pairs (58 Pa. Code
§ 627c.1(d); blackjack: the Perfect Pairs rule sheet, rule 7), Ultimate Pairs (§ 653b.5(f)), Player,
Banker and Tie (§ 631a.8(a)(1)-(3)), Dragon Bonus (§ 631a.8(a)(4)), Dragon 7 and Panda 8
(§ 631a.8(a)(5), (6)), House Money (§ 631a.8(a)(7)); odds per rules.md §1.7. The blackjack and Ante
main wagers are not settled by tablesense and list their limits only. Money (``min``/``max``, the
commission unit) is integer minor units. Nothing private: no devices, broker, journal or credentials.
"""

from __future__ import annotations

from typing import Any

import msgspec

from tablesense.daemon.config import TableConfig
from tablesense.daemon.messages import CommissionInfo, PaytableLine, SpotInfo, TableInfo, WagerInfo
from tablesense.daemon.rules.baccarat import BaccaratRules, BaccaratVariant
from tablesense.daemon.rules.baccarat_wagers import DRAGON_7_ODDS, PANDA_8_ODDS
from tablesense.daemon.rules.blackjack import BlackjackRules
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.money import CommissionRule, RoundingMode, percent_text
from tablesense.daemon.rules.pairs import PairKind, PairPaytable
from tablesense.daemon.rules.uth import UthRules
from tablesense.daemon.signage.view import BET_LABELS, CATEGORY_LABELS, category_label, format_money

__all__ = ["LINE_LABELS", "MAIN_WAGERS", "TABLE_INFO_SCHEMA", "commission_info", "percent_text", "table_info",
           "table_info_message"]

TABLE_INFO_SCHEMA = "tablesense.table_info"
"""Schema name of :class:`daemon.messages.TableInfo`."""
MAIN_WAGERS = frozenset({"player", "banker", "blackjack", "ante"})
"""Main wagers: listed in ``main_wagers``, not in the side-wager panel's ``wagers``."""

LINE_LABELS = CATEGORY_LABELS
"""English labels of the paytable lines, by the settlement category they pay (displays translate by
category; docs/signage.md)."""

_ROUNDING_TEXT = {RoundingMode.UP: "rounded up to {unit}", RoundingMode.DOWN: "rounded down to {unit}",
                  RoundingMode.HALF_UP: "rounded to the nearest {unit}",
                  RoundingMode.HALF_EVEN: "rounded to the nearest {unit}, halves to even"}


def commission_info(rule: CommissionRule, currency: str, minor_unit: int) -> CommissionInfo:
    """The public form of the Banker commission rule (58 Pa. Code § 631a.13 vigorish; rules.md §1.7),
    e.g. 5 %, unit 100 cents, rounded up -> ``CommissionInfo(rate="5%", unit=100, rounding="up",
    text="5% commission on Banker wins, rounded up to $1")``. ``minor_unit`` is the currency's digits."""
    unit = format_money(rule.unit, currency, minor_unit)
    rounding = _ROUNDING_TEXT[rule.mode].format(unit=unit)
    text = f"{percent_text(rule.rate)} commission on Banker wins, {rounding}"
    return CommissionInfo(rate=percent_text(rule.rate), unit=rule.unit, rounding=rule.mode.value, text=text)


def _line(category: str, odds: object) -> PaytableLine:
    return PaytableLine(category=category, label=LINE_LABELS.get(category, category_label(category)),
                        odds=str(odds))


def _pair_lines(pt: PairPaytable) -> list[PaytableLine]:
    return [_line(k.value, pt.odds(k)) for k in (PairKind.PERFECT, PairKind.COLORED, PairKind.MIXED)]


def _baccarat_lines(bet: str, rules: BaccaratRules) -> list[PaytableLine]:
    if bet == "player":
        return [_line("player_win", "1 to 1")]
    if bet == "banker":
        lines = [_line("banker_win", "1 to 1")]
        if rules.variant is BaccaratVariant.EZ:
            lines.append(_line("banker_dragon_7", "push"))
        return lines
    if bet == "tie":
        return [_line("tie", rules.tie)]
    if bet == "perfect_pairs":
        return _pair_lines(rules.perfect_pairs)
    if bet == "dragon_bonus":
        db = rules.dragon_bonus
        return [_line("natural_win", db.natural_win), _line("natural_tie", "push"),
                *(_line(f"win_by_{9 - i}", odds) for i, odds in enumerate(db.win_by))]
    if bet == "house_money":
        hm = rules.house_money
        return [_line("one_pair", hm.one_pair), _line("both_pairs", hm.both_pairs)]
    if bet == "dragon_7":
        return [_line("dragon_7", DRAGON_7_ODDS)]
    if bet == "panda_8":
        return [_line("panda_8", PANDA_8_ODDS)]
    return []


def _lines(rules: Any, bet: str) -> list[PaytableLine]:
    """The odds lines of ``bet`` under ``rules`` (the config's rules object), highest paying line of a
    pair paytable first; ``[]`` for a wager tablesense does not settle (blackjack, Ante)."""
    if isinstance(rules, BaccaratRules):
        return _baccarat_lines(bet, rules)
    if isinstance(rules, BlackjackRules) and bet == "perfect_pairs":
        return _pair_lines(rules.perfect_pairs)
    if isinstance(rules, UthRules) and bet == "ultimate_pairs":
        pt = rules.paytable
        return [_line(line, pt.odds(line)) for line in pt.offered_lines]
    return []


def table_info_message(cfg: TableConfig, *, ts: str, shoe: int | None = None) -> TableInfo:
    """The :class:`~daemon.messages.TableInfo` message for ``cfg`` (shape in the module doc).

    ``ts`` is the ISO-8601 time of the input that caused it (this module reads no clock); ``shoe`` the
    shoe in play. For a config the rules core rejects (not validated) the wagers are listed with their
    paytable's name only. Never raises for a parsed config.
    """
    try:
        rules: Any = cfg.rules()
    except (RulesError, ValueError):
        rules = None
    side: list[WagerInfo] = []
    main: list[WagerInfo] = []
    for bet, w in cfg.wagers.items():
        label = BET_LABELS.get(bet, category_label(bet))
        if rules is not None:
            lines = _lines(rules, bet)
        else:
            lines = [PaytableLine(category="paytable", label="Paytable", odds=w.paytable)
                     ] if w.paytable else []
        info = WagerInfo(bet=bet, label=label, paytable_name=w.paytable, paytable=tuple(lines), min=w.min,
                         max=w.max)
        (main if bet in MAIN_WAGERS else side).append(info)
    commission = rule = None
    if isinstance(rules, BaccaratRules) and rules.takes_commission:
        rule = commission_info(rules.commission, cfg.currency, cfg.minor_unit)
        commission = rule.rate
    elif cfg.game == "baccarat" and rules is None:
        commission = cfg.commission.rate if cfg.commission is not None else "5%"
    spots = tuple(SpotInfo(spot=spot, seat=s.seat, bet=s.bet, hand=s.hand) for spot, s in cfg.spots.items())
    return TableInfo(table=cfg.table, ts=ts, shoe=shoe, game=cfg.game, decks=cfg.shoe_decks,
                     currency=cfg.currency, minor_unit=cfg.minor_unit, wagers=tuple(side),
                     main_wagers=tuple(main), commission=commission, commission_rule=rule,
                     seats=tuple(cfg.seats), spots=spots, language=cfg.signage.language)


def table_info(cfg: TableConfig) -> dict[str, Any]:
    """The ``tablesense.table_info`` payload for ``cfg`` as a JSON-ready dict (what
    ``tablesense signage --config`` shows before the daemon's retained message arrives)."""
    result: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(table_info_message(cfg, ts="")))
    return result  # through JSON: lists, not tuples, exactly as a subscriber receives it
