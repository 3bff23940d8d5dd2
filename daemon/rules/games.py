"""The games tablesense settles, by name: each game's rules, settlement and exact analysis.

A small dispatcher used by the command line (``tablesense settle``/``analyze``) and by the table
configuration: ``get_game("blackjack").rules(6, {"perfect_pairs": "30-10-5"}, None)`` builds the
rules object, ``.settle(round_cards, wagers, rules)`` settles one round and ``.analyze(rules)`` gives
the exact analysis of every wager the game offers.

Games and their sources:
    * ``baccarat`` and ``ez-baccarat``: 58 Pa. Code § 627a.8, § 627c.1, § 631a.8, § 631a.11
      (:mod:`daemon.rules.baccarat`); the round is every card in draw order (burn cards excluded).
    * ``blackjack``: Perfect Pairs rule sheet (:mod:`daemon.rules.blackjack`); the round is
      each box's first two cards.
    * ``uth``: Ultimate Texas Hold 'Em Ultimate Pairs, § 653b.5 (:mod:`daemon.rules.uth`); the round
      is each spot's two cards and the dealer's two.

Pure: no I/O, no clock. The baccarat modules are imported when a baccarat game is first used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tablesense.daemon.rules.analysis import WagerAnalysis
from tablesense.daemon.rules.blackjack import BlackjackRules, analyze_blackjack, settle_blackjack
from tablesense.daemon.rules.cards import Card
from tablesense.daemon.rules.errors import RulesError
from tablesense.daemon.rules.money import CommissionRule
from tablesense.daemon.rules.settlement import Settlement, Wager
from tablesense.daemon.rules.uth import UthRules, analyze_uth, settle_uth

__all__ = ["GAMES", "Game", "RoundCards", "UnknownGame", "get_game"]

RoundCards = Sequence[Card] | Mapping[str, Sequence[Card]]
"""A round's cards: baccarat, every card in draw order; blackjack and UTH, position -> its two cards."""


class UnknownGame(RulesError):
    """A game name tablesense does not know."""


@dataclass(frozen=True, slots=True)
class Game:
    """One game: how to build its rules, settle a round and analyse its wagers.

    Attributes:
        name: ``baccarat``, ``ez-baccarat``, ``blackjack`` or ``uth``.
        deals: ``"cards"`` (baccarat: one list in draw order) or ``"hands"`` (position -> cards).
        default_decks: the deck count used when none is given (UTH: 1), else ``None`` (required).
        takes_commission: True when a ``commission`` applies (standard baccarat only).
        build: ``(decks, paytables, commission) -> rules``; raises :class:`RulesError` subclasses.
        settle_round: ``(round cards, wagers, rules) -> settlements``.
        analyze_rules: ``rules -> analyses``, one per wager the game offers.
        paytables_of: ``rules -> {bet name: paytable name}`` in force.
    """

    name: str
    deals: Literal["cards", "hands"]
    default_decks: int | None
    takes_commission: bool
    build: Callable[[int, Mapping[str, str] | None, CommissionRule | None], Any]
    settle_round: Callable[[Any, Sequence[Wager], Any], list[Settlement]]
    analyze_rules: Callable[[Any], list[WagerAnalysis]]
    paytables_of: Callable[[Any], dict[str, str]]

    def rules(self, decks: int | None, paytables: Mapping[str, str] | None = None,
              commission: CommissionRule | None = None) -> Any:
        """The game's rules object for ``decks`` (``None``: the game's default) and paytable names.

        Raises:
            RulesError: no deck count where the game has no default, a commission where the game
                takes none, or any error of the game's own ``from_names`` (bad decks, unknown or
                disallowed paytable, paytable for a bet the game does not offer).
        """
        if decks is None:
            if self.default_decks is None:
                raise RulesError(f"{self.name}: the number of decks is required")
            decks = self.default_decks
        if commission is not None and not self.takes_commission:
            raise RulesError(f"{self.name} takes no commission")
        return self.build(decks, paytables, commission)

    def settle(self, cards: RoundCards, wagers: Sequence[Wager], rules: Any) -> list[Settlement]:
        """Settle one round (see the game module's ``settle_*`` for shapes and errors)."""
        if self.deals == "hands" and not isinstance(cards, Mapping):
            raise RulesError(f"{self.name}: the round is given as hands (position -> cards)")
        if self.deals == "cards" and isinstance(cards, Mapping):
            raise RulesError(f"{self.name}: the round is given as cards in draw order")
        return self.settle_round(cards, wagers, rules)

    def analyze(self, rules: Any) -> list[WagerAnalysis]:
        """Exact analysis of every wager the game offers under ``rules``."""
        return self.analyze_rules(rules)


def _baccarat_build(variant: str) -> Callable[[int, Mapping[str, str] | None, CommissionRule | None], Any]:
    def build(decks: int, paytables: Mapping[str, str] | None, commission: CommissionRule | None) -> Any:
        from tablesense.daemon.rules.baccarat import BaccaratRules

        return BaccaratRules.from_names(variant, decks, paytables, commission)
    return build


def _baccarat_settle(cards: Sequence[Card], wagers: Sequence[Wager], rules: Any) -> list[Settlement]:
    from tablesense.daemon.rules.baccarat import settle_baccarat

    return settle_baccarat(cards, wagers, rules)


def _baccarat_analyze(rules: Any) -> list[WagerAnalysis]:
    from tablesense.daemon.rules.baccarat_analysis import analyze_baccarat

    return analyze_baccarat(rules)


def _baccarat_paytables(rules: Any) -> dict[str, str]:
    from tablesense.daemon.rules.baccarat import BaccaratVariant

    tables = {"perfect_pairs": rules.perfect_pairs.name, "tie": f"{rules.tie.pays}-{rules.tie.per}",
              "dragon_bonus": rules.dragon_bonus.name, "house_money": rules.house_money.name}
    if rules.variant is BaccaratVariant.EZ:
        tables |= {"dragon_7": "40-1", "panda_8": "25-1"}
    return tables


def _blackjack_build(decks: int, paytables: Mapping[str, str] | None, _: CommissionRule | None) -> Any:
    return BlackjackRules.from_names(decks, paytables)


def _uth_build(decks: int, paytables: Mapping[str, str] | None, _: CommissionRule | None) -> Any:
    return UthRules.from_names(decks, paytables)


GAMES: dict[str, Game] = {
    "baccarat": Game("baccarat", "cards", None, True, _baccarat_build("baccarat"), _baccarat_settle,
                     _baccarat_analyze, _baccarat_paytables),
    "ez-baccarat": Game("ez-baccarat", "cards", None, False, _baccarat_build("ez-baccarat"), _baccarat_settle,
                        _baccarat_analyze, _baccarat_paytables),
    "blackjack": Game("blackjack", "hands", None, False, _blackjack_build, settle_blackjack,
                      analyze_blackjack, lambda r: r.paytables),
    "uth": Game("uth", "hands", 1, False, _uth_build, settle_uth, analyze_uth, lambda r: r.paytables),
}
"""Every game by name."""


def get_game(name: str) -> Game:
    """The game called ``name``; raise :class:`UnknownGame` naming the choices otherwise."""
    game = GAMES.get(name) if isinstance(name, str) else None
    if game is None:
        raise UnknownGame(f"unknown game {name!r} (choose one of {', '.join(GAMES)})")
    return game
