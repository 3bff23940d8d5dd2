"""``tablesense settle [FILE|-]``: settle one round given as JSON, print the settlement as JSON.

Input (one JSON object; unknown keys are rejected so a misspelt key is never silently ignored)::

    {"game": "blackjack",                 # baccarat | ez-baccarat | blackjack | uth
     "decks": 6,                          # 1..8; optional for uth (one deck)
     "paytables": {"perfect_pairs": "30-10-5"},   # optional, bet name -> paytable name
     "commission": "5%",                  # optional, baccarat only; or {"rate": "5%", "unit": 25,
                                          #   "rounding": "half_up"|"half_even"|"up"|"down"}
     "wagers": [{"spot": "3", "bet": "perfect_pairs", "hand": null, "stake": 2500}],
     "hands": {"3": ["QH", "QD"], "dealer": ["9S", "7C"]}}    # blackjack, uth
     # baccarat instead: "cards": ["QH", "4D", "9S", "KC", "2H"]  (draw order, burn cards excluded)

Stakes are integer minor units (cents), 1 to the largest stake whose win at the wager's largest odds (in
the paytable in force) stays at most 2**53 - 1 (:func:`daemon.rules.money.max_stake`), so every amount
printed is exact for JSON consumers; the totals too. A float stake is an error. The input is at most
:data:`MAX_INPUT_BYTES` (4 MiB). Output: ``game``, ``decks``,
``paytables`` (in force), ``commission`` (baccarat), ``wagers`` (each settled wager: spot, bet, hand,
stake, outcome, category, odds, net, commission), ``round`` (baccarat: the coup; others: the hands) and
``totals`` (stake, net and commission summed). Wagers that only make another eligible (blackjack's
``blackjack``, UTH's ``ante``) are not settled by tablesense and are not listed.

Every bad input is one line on stderr and exit status 2 (:class:`daemon.cli.UsageError`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tablesense.daemon.bounded import InputTooLarge, read_bounded
from tablesense.daemon.cli import UsageError
from tablesense.daemon.config import MAX_MONEY, RATE_TEXT
from tablesense.daemon.rules.cards import Card, InvalidCard
from tablesense.daemon.rules.games import Game, RoundCards, get_game
from tablesense.daemon.rules.money import (
    MAX_AMOUNT,
    CommissionRule,
    RoundingMode,
    max_stake,
    percent_text,
    wager_odds,
)
from tablesense.daemon.rules.settlement import Bet, Hand, Wager

__all__ = ["RoundRequest", "parse_request", "register", "run", "settle_document", "settle_request"]

MAX_INPUT_BYTES = 4 << 20
"""The request (file or stdin) is at most 4 MiB: a round is a few hundred bytes, a table of 7 boxes with
every side wager well under 64 KiB; anything larger is refused before it is decoded."""

_KEYS = {"game", "decks", "paytables", "commission", "wagers", "cards", "hands"}
_WAGER_KEYS = {"spot", "bet", "hand", "stake"}
_COMMISSION_KEYS = {"rate", "unit", "rounding"}


@dataclass(frozen=True, slots=True)
class RoundRequest:
    """A checked settle request: the game, its rules object, the wagers and the round's cards."""

    game: Game
    rules: Any
    wagers: tuple[Wager, ...]
    cards: RoundCards


class _Bad(ValueError):
    """A malformed request (wrong shape or type); becomes a :class:`UsageError`."""


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", int: "an integer",
            float: "a decimal number", type(None): "null"}.get(type(value), type(value).__name__)


def _expect(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> None:
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise _Bad(f"{where}: expected {what}, got {_type_name(value)}")


def _parse_commission(raw: Any) -> CommissionRule:
    if isinstance(raw, (str, int)) and not isinstance(raw, bool):
        raw = {"rate": raw}
    _expect(raw, dict, "commission", "a rate such as \"5%\" or an object {rate, unit, rounding}")
    unknown = set(raw) - _COMMISSION_KEYS
    if unknown:
        raise _Bad(f"commission: unknown key {sorted(unknown)[0]!r} (expected rate, unit, rounding)")
    rate = Fraction(5, 100)
    if "rate" in raw:
        _expect(raw["rate"], (str, int), "commission.rate", "a rate such as \"5%\" or \"0.05\"")
        if not RATE_TEXT.fullmatch(str(raw["rate"])):
            raise _Bad(f"commission.rate: not a rate: {str(raw['rate'])[:40]!r} (e.g. \"5%\", \"0.05\", "
                       "\"1/20\"; plain digits, no exponent)")
        try:
            rate = CommissionRule.parse_rate(raw["rate"])
        except (ValueError, ZeroDivisionError):
            raise _Bad(f"commission.rate: not a rate: {raw['rate']!r} (e.g. \"5%\")") from None
    unit = raw.get("unit", 1)
    _expect(unit, int, "commission.unit", "an integer number of minor units")
    if not 1 <= unit <= MAX_MONEY:
        raise _Bad(f"commission.unit: must be 1 to {MAX_MONEY} minor units, got {_short(unit)}")
    rounding = raw.get("rounding", RoundingMode.HALF_UP.value)
    _expect(rounding, str, "commission.rounding", "a rounding mode")
    try:
        mode = RoundingMode(rounding)
    except ValueError:
        raise _Bad(f"commission.rounding: unknown mode {rounding!r} "
                   f"(choose {', '.join(m.value for m in RoundingMode)})") from None
    try:
        return CommissionRule(rate, unit, mode)
    except ValueError:
        shown = str(raw.get("rate"))[:40]
        raise _Bad(f"commission.rate: the commission rate {shown!r} must be below 100%") from None


def _short(n: int) -> str:
    """``n`` in decimal, or its digit count when it is too long to print in one line."""
    digits = len(str(abs(n))) if n.bit_length() < 10_000 else None
    return str(n) if digits is not None and digits <= 30 else f"a {digits or 'many'}-digit number"


def _parse_card(raw: Any, where: str) -> Card:
    _expect(raw, str, where, "a card such as \"QH\" or \"10D\"")
    try:
        return Card.parse(raw)
    except InvalidCard as exc:
        raise _Bad(f"{where}: {exc}") from None


def _parse_wager(raw: Any, i: int) -> Wager:
    where = f"wagers[{i}]"
    _expect(raw, dict, where, "an object {spot, bet, hand, stake}")
    unknown = set(raw) - _WAGER_KEYS
    if unknown:
        raise _Bad(f"{where}: unknown key {sorted(unknown)[0]!r} (expected spot, bet, hand, stake)")
    for key in ("spot", "bet", "stake"):
        if key not in raw:
            raise _Bad(f"{where}: missing key {key!r}")
    _expect(raw["spot"], str, f"{where}.spot", "a string such as \"3\"")
    _expect(raw["bet"], str, f"{where}.bet", "a bet name")
    try:
        bet = Bet(raw["bet"])
    except ValueError:
        raise _Bad(f"{where}.bet: unknown bet {raw['bet']!r} "
                   f"(one of {', '.join(b.value for b in Bet)})") from None
    hand: Hand | None = None
    if raw.get("hand") is not None:
        _expect(raw["hand"], str, f"{where}.hand", "\"player\", \"banker\" or null")
        try:
            hand = Hand(raw["hand"])
        except ValueError:
            raise _Bad(f"{where}.hand: unknown hand {raw['hand']!r} (player, banker or null; blackjack and "
                       "uth wagers name no hand: the spot is the box, as in \"hands\")") from None
    stake = raw["stake"]
    if isinstance(stake, float):
        raise _Bad(f"{where}.stake: must be an integer number of minor units (cents), got {stake!r}")
    _expect(stake, int, f"{where}.stake", "an integer number of minor units (cents)")
    if stake <= 0:
        raise _Bad(f"{where}.stake: must be a positive number of minor units, got {_short(stake)}")
    if stake > MAX_MONEY:
        raise _Bad(f"{where}.stake: {_short(stake)} is above the largest stake {MAX_MONEY} minor units "
                   "(2**53 - 1, exact in JSON consumers)")
    return Wager(raw["spot"], bet, stake, hand)


def _parse_round_cards(doc: Mapping[str, Any], game: Game) -> RoundCards:
    other = "hands" if game.deals == "cards" else "cards"
    if other in doc:
        raise _Bad(f"{game.name}: give the round as {game.deals!r}, not {other!r}")
    if game.deals not in doc:
        raise _Bad(f"missing key {game.deals!r} (the round's cards)")
    raw = doc[game.deals]
    if game.deals == "cards":
        _expect(raw, list, "cards", "a list of cards in draw order")
        return [_parse_card(t, f"cards[{i}]") for i, t in enumerate(raw)]
    _expect(raw, dict, "hands", "an object: position -> list of cards")
    hands: dict[str, list[Card]] = {}
    for position, cards in raw.items():
        _expect(cards, list, f"hands.{position}", "a list of cards")
        hands[position] = [_parse_card(t, f"hands.{position}[{i}]") for i, t in enumerate(cards)]
    return hands


def parse_request(doc: Any) -> RoundRequest:
    """Check a decoded JSON settle request and build its rules, wagers and cards.

    Raises:
        ValueError: anything wrong with the request, with a one-line message naming the key (a
            :class:`~daemon.rules.errors.RulesError` for rule violations such as a paytable not
            allowed with the deck count).
    """
    _expect(doc, dict, "input", "a JSON object")
    unknown = set(doc) - _KEYS
    if unknown:
        raise _Bad(f"unknown key {sorted(unknown)[0]!r} (expected {', '.join(sorted(_KEYS))})")
    if "game" not in doc:
        raise _Bad("missing key 'game'")
    _expect(doc["game"], str, "game", "a game name")
    game = get_game(doc["game"])
    decks = doc.get("decks")
    if decks is None and game.default_decks is None:
        raise _Bad(f"missing key 'decks' (the number of decks in the {game.name} shoe)")
    if decks is not None:
        _expect(decks, int, "decks", "an integer from 1 to 8")
    paytables = doc.get("paytables")
    if paytables is None:
        paytables = {}
    _expect(paytables, dict, "paytables", "an object: bet name -> paytable name")
    for bet, name in paytables.items():
        _expect(name, str, f"paytables.{bet}", "a paytable name such as \"A\" or \"25-12-6\"")
    commission = _parse_commission(doc["commission"]) if doc.get("commission") is not None else None
    if "wagers" not in doc:
        raise _Bad("missing key 'wagers'")
    _expect(doc["wagers"], list, "wagers", "a list of wagers")
    wagers = tuple(_parse_wager(w, i) for i, w in enumerate(doc["wagers"]))
    cards = _parse_round_cards(doc, game)
    rules = game.rules(decks, paytables, commission)
    odds = wager_odds(game.name, rules)
    for i, w in enumerate(wagers):
        bound = max_stake([odds.get(w.bet.value)])
        if w.stake > bound:
            ratio = odds[w.bet.value]
            raise _Bad(f"wagers[{i}].stake: {_short(w.stake)} at {w.bet.value}'s largest odds "
                       f"({ratio.numerator} to {ratio.denominator}) would pay more than {MAX_AMOUNT} "
                       f"(2**53 - 1 minor units, exact in JSON consumers): at most {bound}")
    return RoundRequest(game, rules, wagers, cards)


def settle_request(request: RoundRequest) -> dict[str, Any]:
    """Settle a checked request; the JSON-ready result (see the module docstring for its keys).

    Raises:
        ValueError: the rules reject the round (CardNotInShoe, IncompleteRound, WagerNotOffered ...).
    """
    game, rules = request.game, request.rules
    settlements = game.settle(request.cards, request.wagers, rules)
    out: dict[str, Any] = {"game": game.name, "decks": rules.decks, "paytables": game.paytables_of(rules)}
    if game.takes_commission:
        c: CommissionRule = rules.commission
        out["commission"] = {"rate": percent_text(c.rate), "unit": c.unit, "rounding": c.mode.value}
    out["wagers"] = [s.to_dict() for s in settlements]
    if game.deals == "cards":
        from tablesense.daemon.rules.baccarat import coup_from_cards

        assert isinstance(request.cards, Sequence)
        out["round"] = coup_from_cards(request.cards).to_dict()
    else:
        assert isinstance(request.cards, Mapping)
        out["round"] = {"hands": {pos: [str(card) for card in cards] for pos, cards in request.cards.items()}}
    out["totals"] = {"stake": sum(s.wager.stake for s in settlements), "net": sum(s.net for s in settlements),
                     "commission": sum(s.commission for s in settlements)}
    for key, total in out["totals"].items():
        if abs(total) > MAX_AMOUNT:
            raise _Bad(f"wagers: the total {key} {_short(total)} is beyond {MAX_AMOUNT} (2**53 - 1 minor "
                       "units, exact in JSON consumers): settle fewer or smaller wagers at once")
    return out


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Bad(f"key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def settle_document(text: str) -> dict[str, Any]:
    """Decode a JSON settle request, settle it and return the JSON-ready result.

    Raises:
        UsageError: malformed JSON, a malformed request or a round the rules reject (one line).
    """
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _Bad as exc:
        raise UsageError(f"settle: input is not valid: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"settle: input is not valid JSON: {_one_line(exc)}") from None
    try:
        return settle_request(parse_request(doc))
    except ValueError as exc:  # RulesError, InvalidCard, CardNotInShoe are ValueErrors
        raise UsageError(f"settle: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``settle`` sub-command."""
    p = subparsers.add_parser(
        "settle", help="settle one round given as JSON (file or stdin)",
        description="Read one round as JSON (game, decks, paytables, commission, wagers, and cards or "
                    "hands) and print its settlement as JSON. Stakes are integer minor units (cents).")
    p.add_argument("file", nargs="?", default="-", metavar="FILE|-",
                   help="JSON file, or - for stdin (default)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the request from ``args.file`` (or stdin), print the settlement; exit status 0."""
    try:
        text = read_bounded(args.file, MAX_INPUT_BYTES, "-" if args.file == "-" else None).decode("utf-8")
    except InputTooLarge as exc:
        raise UsageError(f"settle: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"settle: cannot read {args.file}: {_one_line(exc)}") from None
    result = settle_document(text)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0
