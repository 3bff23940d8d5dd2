"""Baccarat: the round from its cards, the table's rules submission, and exact settlement of every wager.

Sources (the seeds are authoritative; rules.md §1 summarises them):
    * 58 Pa. Code § 627a.8: cards 1 and 3 go to the Player hand, 2 and 4 to the Banker hand; Perfect
      Pairs and House Money are settled once the first four cards are known (§ 627a.8(d), § 627c.1(c)).
    * 58 Pa. Code § 631a.11 (rules.md §1.5): naturals stop the deal; the Player draws on 0-5; the Banker
      draws by its point count and the value of the Player's third card.
    * 58 Pa. Code § 631a.8(a)(1)-(7): Banker, Player, Tie, Dragon Bonus, Dragon 7, Panda 8 and
      House Money; § 627a.1 definitions of Natural, Dragon 7, Panda 8 and EZ Baccarat.
    * 58 Pa. Code § 627c.1: Perfect Pairs on the Player and/or the Banker hand.

Everything here is pure: no I/O, no clock, no mutable globals. Money is integer minor units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from tablesense.daemon.rules.baccarat_wagers import (
    DRAGON_7_ODDS,
    DRAGON_BONUS_PAYTABLES,
    HOUSE_MONEY_PAYTABLES,
    PANDA_8_ODDS,
    DragonBonusPaytable,
    HouseMoneyPaytable,
    lookup_dragon_bonus,
    lookup_fixed_odds,
    lookup_house_money,
    lookup_tie,
)
from tablesense.daemon.rules.cards import Card, ShoeComposition
from tablesense.daemon.rules.errors import IncompleteRound, RulesError, TooManyCards, WagerNotOffered
from tablesense.daemon.rules.money import NO_COMMISSION, CommissionRule, Odds, winnings
from tablesense.daemon.rules.pairs import (
    BACCARAT_PERFECT_PAIRS,
    PairPaytable,
    PaytableNotAllowed,
    classify_pair,
    is_pair,
    lookup_paytable,
)
from tablesense.daemon.rules.settlement import Bet, Hand, Outcome, Settlement, Wager, settle_as

__all__ = [
    "BaccaratRules",
    "BaccaratVariant",
    "Coup",
    "InvalidRulesSubmission",
    "Ruling",
    "banker_draws",
    "coup_from_cards",
    "next_card_hand",
    "player_draws",
    "point_count",
    "rule_dragon_bonus",
    "rule_house_money",
    "rule_main_wager",
    "rule_perfect_pairs",
    "settle_baccarat",
    "settle_two_card_wagers",
]


class InvalidRulesSubmission(RulesError):
    """A rules submission tablesense cannot use: unknown variant or bet name, decks outside 1..8,
    commission on an EZ Baccarat table. Unknown paytables raise :class:`PaytableNotAllowed`."""


class BaccaratVariant(StrEnum):
    """Standard baccarat (Banker wins less commission) or EZ Baccarat (no commission, § 627a.1)."""

    STANDARD = "baccarat"
    EZ = "ez-baccarat"


_VARIANT_ALIASES = {"baccarat": BaccaratVariant.STANDARD, "standard": BaccaratVariant.STANDARD,
                    "minibaccarat": BaccaratVariant.STANDARD, "ez-baccarat": BaccaratVariant.EZ,
                    "ez": BaccaratVariant.EZ, "ez_baccarat": BaccaratVariant.EZ}

_DEFAULT_PERFECT_PAIRS = "A"
_DEFAULT_TIE = Odds(8)
_EZ_NO_COMMISSION = "ez-baccarat takes no commission on Banker wins (58 Pa. Code § 627a.1)"
_DEFAULT_DRAGON_BONUS = "standard"
_DEFAULT_HOUSE_MONEY = "3-15"


@dataclass(frozen=True, slots=True)
class BaccaratRules:
    """The table's rules submission (58 Pa. Code § 601a.2): variant, shoe and paytables.

    Attributes:
        variant: standard or EZ Baccarat.
        decks: decks in the shoe, 1 to 8.
        commission: commission on a winning Banker wager (standard only; EZ takes none, § 627a.1).
        tie: Tie odds, 8 to 1 or 9 to 1.
        perfect_pairs: Perfect Pairs paytable (§ 627c.1(d); Perfect Pairs rule sheet rule 8).
        dragon_bonus: Dragon Bonus paytable (§ 631a.8(a)(4)).
        house_money: House Money paytable (§ 631a.8(a)(7)).

    Raises:
        InvalidRulesSubmission: decks outside 1..8, or a commission on an EZ table.
        PaytableNotAllowed: a Perfect Pairs paytable not allowed with ``decks`` (25-12-5 needs 8 decks).
    """

    variant: BaccaratVariant
    decks: int
    commission: CommissionRule = field(default_factory=CommissionRule)
    tie: Odds = _DEFAULT_TIE
    perfect_pairs: PairPaytable = BACCARAT_PERFECT_PAIRS[_DEFAULT_PERFECT_PAIRS]
    dragon_bonus: DragonBonusPaytable = DRAGON_BONUS_PAYTABLES[_DEFAULT_DRAGON_BONUS]
    house_money: HouseMoneyPaytable = HOUSE_MONEY_PAYTABLES[_DEFAULT_HOUSE_MONEY]

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "variant", BaccaratVariant(self.variant))
        except ValueError:
            raise InvalidRulesSubmission(f"unknown baccarat game {self.variant!r} "
                                         "(choose baccarat or ez-baccarat)") from None
        if not isinstance(self.decks, int) or isinstance(self.decks, bool) or not 1 <= self.decks <= 8:
            raise InvalidRulesSubmission(f"decks must be an integer from 1 to 8, got {self.decks!r}")
        if self.variant is BaccaratVariant.EZ and self.commission.rate != 0:
            raise InvalidRulesSubmission(_EZ_NO_COMMISSION)
        if self.decks not in self.perfect_pairs.decks:
            allowed = ", ".join(str(d) for d in sorted(self.perfect_pairs.decks))
            raise PaytableNotAllowed(f"perfect_pairs: paytable {self.perfect_pairs.name!r} is allowed with "
                                     f"{allowed} decks only, not {self.decks} ({self.perfect_pairs.source})")

    @classmethod
    def from_names(cls, variant: str, decks: int, paytables: Mapping[str, str] | None = None,
                   commission: CommissionRule | None = None) -> BaccaratRules:
        """Build the rules from names, as given in a settle request or a table configuration.

        Args:
            variant: ``baccarat`` or ``ez-baccarat``.
            decks: 1 to 8.
            paytables: bet name -> paytable name: ``perfect_pairs`` ``A``/``B``/``C``/``25-12-5`` (or the
                odds ``25-12-6`` ...), ``tie`` ``8-1``/``9-1``, ``dragon_bonus`` ``standard``,
                ``house_money`` ``3-15`` (or any ``N-M``), ``dragon_7`` ``40-1``, ``panda_8`` ``25-1``.
                Bets not named get the defaults (A, 8-1, standard, 3-15).
            commission: Banker commission (standard only); default 5 % rounded half up to 1 cent.

        Raises:
            InvalidRulesSubmission: unknown variant or bet name, bad decks, commission on EZ.
            PaytableNotAllowed: unknown paytable, or one not allowed with ``decks``.
        """
        v = _VARIANT_ALIASES.get(str(variant).strip().lower())
        if v is None:
            raise InvalidRulesSubmission(
                f"unknown baccarat game {variant!r} (choose baccarat or ez-baccarat)")
        if not isinstance(decks, int) or isinstance(decks, bool) or not 1 <= decks <= 8:
            raise InvalidRulesSubmission(f"decks must be an integer from 1 to 8, got {decks!r}")
        if v is BaccaratVariant.EZ:
            if commission is not None and commission.rate != 0:
                raise InvalidRulesSubmission(_EZ_NO_COMMISSION)
            commission = NO_COMMISSION
        kwargs: dict[str, Any] = {}
        for raw_bet, name in (paytables or {}).items():
            bet = str(raw_bet).strip().lower().replace("-", "_")
            if bet == Bet.PERFECT_PAIRS:
                kwargs["perfect_pairs"] = _lookup_perfect_pairs(name, decks)
            elif bet == Bet.TIE:
                kwargs["tie"] = lookup_tie(name)
            elif bet == Bet.DRAGON_BONUS:
                kwargs["dragon_bonus"] = lookup_dragon_bonus(name)
            elif bet == Bet.HOUSE_MONEY:
                kwargs["house_money"] = lookup_house_money(name)
            elif bet in (Bet.DRAGON_7, Bet.PANDA_8) and v is BaccaratVariant.EZ:
                lookup_fixed_odds(bet, name, DRAGON_7_ODDS if bet == Bet.DRAGON_7 else PANDA_8_ODDS)
            else:
                ez_bets = ", dragon_7, panda_8" if v is BaccaratVariant.EZ else ""
                raise InvalidRulesSubmission(
                    f"{v.value} has no paytable for bet {raw_bet!r} (paytables are named for perfect_pairs, "
                    f"tie, dragon_bonus, house_money{ez_bets})")
        return cls(variant=v, decks=decks, commission=commission or CommissionRule(), **kwargs)

    def offers(self, bet: Bet) -> bool:
        """True when this table offers ``bet``: Dragon 7 and Panda 8 on EZ Baccarat only
        (§ 631a.8(a)(5), (6)); blackjack and UTH wagers never."""
        if bet in (Bet.DRAGON_7, Bet.PANDA_8):
            return self.variant is BaccaratVariant.EZ
        return bet in (Bet.PLAYER, Bet.BANKER, Bet.TIE, Bet.DRAGON_BONUS, Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY)

    @property
    def takes_commission(self) -> bool:
        """True when Banker wins are paid less commission (standard baccarat with a non-zero rate)."""
        return self.variant is BaccaratVariant.STANDARD and self.commission.rate != 0


def _lookup_perfect_pairs(name: str, decks: int) -> PairPaytable:
    return lookup_paytable(BACCARAT_PERFECT_PAIRS, name, decks, "perfect_pairs")


# --------------------------------------------------------------------------------------------- the deal


def point_count(cards: Sequence[Card]) -> int:
    """Point Count of a hand: the sum of baccarat values modulo 10 (§ 631a.6; rules.md §1.1)."""
    return sum(c.rank.baccarat_value for c in cards) % 10


def player_draws(player_points: int) -> bool:
    """Whether the Player hand, not a Natural, draws a third card: on 0-5, stands on 6-7 (§ 631a.11).

    Raises:
        ValueError: ``player_points`` outside 0..7 (8 and 9 are Naturals, which never draw).
    """
    if not 0 <= player_points <= 7:
        raise ValueError(f"a Player hand that may draw has 0 to 7 points, got {player_points}")
    return player_points <= 5


_BANKER_DRAWS_ON_P3: dict[int, frozenset[int]] = {
    0: frozenset(range(10)), 1: frozenset(range(10)), 2: frozenset(range(10)),
    3: frozenset({0, 1, 2, 3, 4, 5, 6, 7, 9}),
    4: frozenset({2, 3, 4, 5, 6, 7}),
    5: frozenset({4, 5, 6, 7}),
    6: frozenset({6, 7}),
    7: frozenset(),
}
"""§ 631a.11 Table 1 (rules.md §1.5): Banker point count -> values of the Player's third card it draws on."""


def banker_draws(banker_points: int, player_third: int | None) -> bool:
    """Whether the Banker hand, not a Natural (and the Player not a Natural), draws a third card.

    Args:
        banker_points: Banker point count on two cards, 0..7.
        player_third: baccarat value (0..9) of the Player's third card, or ``None`` when the Player stood.

    When the Player stood the Banker draws on 0-5; otherwise Banker 0-2 draws, 7 stands, and 3-6 follow
    § 631a.11 Table 1 (rules.md §1.5).

    Raises:
        ValueError: points outside 0..7 or a third-card value outside 0..9.
    """
    if not 0 <= banker_points <= 7:
        raise ValueError(f"a Banker hand that may draw has 0 to 7 points, got {banker_points}")
    if player_third is None:
        return banker_points <= 5
    if not 0 <= player_third <= 9:
        raise ValueError(f"a third card's baccarat value is 0 to 9, got {player_third}")
    return player_third in _BANKER_DRAWS_ON_P3[banker_points]


def _hands_for_values(values: Sequence[int]) -> tuple[Hand, ...]:
    """The hand of every card of the round, as far as ``values`` (baccarat values in draw order) decide.

    Returns the complete layout (4 to 6 hands) once ``values`` holds enough cards to know it; with
    fewer cards, the layout known so far plus the hand of the next card.
    """
    layout: tuple[Hand, ...] = (Hand.PLAYER, Hand.BANKER, Hand.PLAYER, Hand.BANKER)
    if len(values) < 4:
        return layout[: len(values) + 1]
    p = (values[0] + values[2]) % 10
    b = (values[1] + values[3]) % 10
    if p >= 8 or b >= 8:
        return layout
    if not player_draws(p):
        return (*layout, Hand.BANKER) if banker_draws(b, None) else layout
    layout = (*layout, Hand.PLAYER)
    if len(values) < 5:
        return layout
    return (*layout, Hand.BANKER) if banker_draws(b, values[4]) else layout


def next_card_hand(cards_so_far: Sequence[Card]) -> Hand | None:
    """The hand the next card out of the shoe goes to, or ``None`` when the round is complete.

    Cards 1 and 3 go to the Player, 2 and 4 to the Banker (§ 627a.8(c)); a 5th card goes to the Player
    when it draws, else to the Banker; a 6th card to the Banker (§ 631a.11).

    Args:
        cards_so_far: the round's cards in draw order, burn cards excluded.

    Raises:
        TooManyCards: ``cards_so_far`` already holds more cards than the round uses.
    """
    values = [c.rank.baccarat_value for c in cards_so_far]
    layout = _hands_for_values(values)
    n = len(values)
    if n < len(layout):
        return layout[n]
    if n > len(layout):
        raise TooManyCards(f"{n} cards given but the round uses {len(layout)} "
                           f"(58 Pa. Code § 631a.11): {' '.join(str(c) for c in cards_so_far)}")
    return None


@dataclass(frozen=True, slots=True)
class Coup:
    """One completed baccarat round.

    Attributes:
        player_cards: the Player hand, 2 or 3 cards, in draw order.
        banker_cards: the Banker hand, 2 or 3 cards, in draw order.
        player_points / banker_points: final Point Counts, 0..9.
        player_natural / banker_natural: the hand is a Natural (8 or 9 on its first two cards, § 627a.1).
        winner: the hand with the higher Point Count, ``None`` for a tie.
        player_pair / banker_pair: the hand's first two cards are of the same rank (§ 627c.1(b)).
        is_dragon_7: the Banker wins with a three-card 7 (§ 627a.1 "Dragon 7").
        is_panda_8: the Player wins with a three-card 8 (§ 627a.1 "Panda 8").
    """

    player_cards: tuple[Card, ...]
    banker_cards: tuple[Card, ...]
    player_points: int
    banker_points: int
    player_natural: bool
    banker_natural: bool
    winner: Hand | None
    player_pair: bool
    banker_pair: bool
    is_dragon_7: bool
    is_panda_8: bool

    @property
    def cards(self) -> tuple[Card, ...]:
        """The round's cards in draw order (P1 B1 P2 B2, then any third cards)."""
        p, b = self.player_cards, self.banker_cards
        return (p[0], b[0], p[1], b[1], *p[2:], *b[2:])

    @property
    def is_tie(self) -> bool:
        """Equal Point Counts."""
        return self.winner is None

    @property
    def result(self) -> str:
        """``player``, ``banker`` or ``tie``."""
        return self.winner.value if self.winner else "tie"

    def hand_cards(self, hand: Hand) -> tuple[Card, ...]:
        """The cards of ``hand``."""
        return self.player_cards if hand is Hand.PLAYER else self.banker_cards

    def points(self, hand: Hand) -> int:
        """The Point Count of ``hand``."""
        return self.player_points if hand is Hand.PLAYER else self.banker_points

    def natural(self, hand: Hand) -> bool:
        """Whether ``hand`` is a Natural."""
        return self.player_natural if hand is Hand.PLAYER else self.banker_natural

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping: ``player``/``banker`` (card strings), ``player_points``/``banker_points``,
        ``winner`` (player, banker or tie), ``player_natural``/``banker_natural``/``natural``,
        ``player_pair``/``banker_pair``, ``dragon_7``, ``panda_8``."""
        return {
            "player": [str(c) for c in self.player_cards],
            "banker": [str(c) for c in self.banker_cards],
            "player_points": self.player_points,
            "banker_points": self.banker_points,
            "winner": self.result,
            "natural": self.player_natural or self.banker_natural,
            "player_natural": self.player_natural,
            "banker_natural": self.banker_natural,
            "player_pair": self.player_pair,
            "banker_pair": self.banker_pair,
            "dragon_7": self.is_dragon_7,
            "panda_8": self.is_panda_8,
        }


def coup_from_cards(cards: Sequence[Card]) -> Coup:
    """Deal a round from its cards in draw order (burn cards excluded) per § 627a.8 and § 631a.11.

    Args:
        cards: 4 to 6 cards: P1 B1 P2 B2, then the Player's third card if it draws, then the Banker's.

    Raises:
        IncompleteRound: fewer cards than the round needs (one-line message naming how many).
        TooManyCards: more cards than the round uses.
    """
    cards = tuple(cards)
    for c in cards:
        if not isinstance(c, Card):
            raise TypeError(f"coup_from_cards needs Card objects, got {type(c).__name__}")
    values = [c.rank.baccarat_value for c in cards]
    if len(values) < 4:
        raise IncompleteRound(f"a baccarat round needs at least 4 cards, got {len(values)}")
    layout = _hands_for_values(values)
    if len(values) < len(layout):
        raise IncompleteRound(f"the round needs a {len(values) + 1}th card "
                              f"(third-card rule, 58 Pa. Code § 631a.11); got "
                              f"{' '.join(str(c) for c in cards)}")
    if len(values) > len(layout):
        raise TooManyCards(f"{len(values)} cards given but the round uses {len(layout)} "
                           f"(58 Pa. Code § 631a.11): {' '.join(str(c) for c in cards)}")
    player = tuple(c for c, h in zip(cards, layout, strict=True) if h is Hand.PLAYER)
    banker = tuple(c for c, h in zip(cards, layout, strict=True) if h is Hand.BANKER)
    p, b = point_count(player), point_count(banker)
    winner = Hand.PLAYER if p > b else Hand.BANKER if b > p else None
    return Coup(
        player_cards=player,
        banker_cards=banker,
        player_points=p,
        banker_points=b,
        player_natural=len(player) == 2 and p >= 8,
        banker_natural=len(banker) == 2 and b >= 8,
        winner=winner,
        player_pair=is_pair(player[0], player[1]),
        banker_pair=is_pair(banker[0], banker[1]),
        is_dragon_7=winner is Hand.BANKER and len(banker) == 3 and b == 7,
        is_panda_8=winner is Hand.PLAYER and len(player) == 3 and p == 8,
    )


# --------------------------------------------------------------------------------------------- rulings


@dataclass(frozen=True, slots=True)
class Ruling:
    """How one wager ends, before money: the single classification used both to settle a stake and, in
    :mod:`daemon.rules.baccarat_analysis`, to weigh every possible round.

    Attributes:
        outcome: win, lose or push.
        category: e.g. ``banker_win``, ``dragon_7``, ``win_by_6``, ``perfect_pair``, ``both_pairs``.
        odds: the odds paid on a win, else ``None``.
        commission_applies: a win is paid less the table's commission (standard Banker win).
    """

    outcome: Outcome
    category: str
    odds: Odds | None = None
    commission_applies: bool = False

    def net_per_unit(self, rules: BaccaratRules) -> Fraction:
        """Exact net per unit staked: odds less the exact (unrounded) commission on a win, -1 on a loss,
        0 on a push."""
        if self.outcome is Outcome.WIN:
            assert self.odds is not None
            ratio = self.odds.ratio
            return ratio * (1 - rules.commission.rate) if self.commission_applies else ratio
        return Fraction(-1) if self.outcome is Outcome.LOSE else Fraction(0)

    def settle(self, wager: Wager, rules: BaccaratRules) -> Settlement:
        """The :class:`Settlement` of ``wager``: winnings in whole minor units, commission computed
        exactly on them and rounded by ``rules.commission`` (rules.md §1.7)."""
        commission = 0
        if self.outcome is Outcome.WIN and self.commission_applies:
            assert self.odds is not None
            commission = rules.commission.commission(winnings(wager.stake, self.odds))
        return settle_as(wager, self.outcome, self.category, self.odds, commission)


_LOSE = "lose"
_NO_PAIR = "no_pair"
_LOSING = Ruling(Outcome.LOSE, _LOSE)


def _result_category(coup: Coup) -> str:
    return "tie" if coup.winner is None else f"{coup.winner.value}_win"


def rule_main_wager(bet: Bet, coup: Coup, rules: BaccaratRules) -> Ruling:
    """Rule a Player, Banker, Tie, Dragon 7 or Panda 8 wager on a completed round (§ 631a.8(a)(1)-(3),
    (5), (6)).

    Player and Banker pay 1 to 1 (Banker less commission on a standard table) and push on a tie; on EZ
    Baccarat a Banker win with a Dragon 7 pushes (category ``dragon_7``). Tie pays ``rules.tie``. Dragon 7
    pays 40 to 1, Panda 8 25 to 1. Categories: ``player_win``, ``banker_win``, ``tie``, ``dragon_7``,
    ``panda_8``, ``lose``.

    Raises:
        WagerNotOffered: a bet that is not one of these five, or Dragon 7 / Panda 8 on a standard table.
    """
    if not rules.offers(bet) or bet not in (Bet.PLAYER, Bet.BANKER, Bet.TIE, Bet.DRAGON_7, Bet.PANDA_8):
        raise WagerNotOffered(f"{bet.value} is not a main wager of {rules.variant.value}")
    cat = _result_category(coup)
    if bet is Bet.TIE:
        return Ruling(Outcome.WIN, cat, rules.tie) if coup.winner is None else Ruling(Outcome.LOSE, cat)
    if bet is Bet.DRAGON_7:
        return Ruling(Outcome.WIN, "dragon_7", DRAGON_7_ODDS) if coup.is_dragon_7 else _LOSING
    if bet is Bet.PANDA_8:
        return Ruling(Outcome.WIN, "panda_8", PANDA_8_ODDS) if coup.is_panda_8 else _LOSING
    if coup.winner is None:
        return Ruling(Outcome.PUSH, cat)
    if bet is Bet.PLAYER:
        return Ruling(Outcome.WIN, cat, Odds(1)) if coup.winner is Hand.PLAYER else Ruling(Outcome.LOSE, cat)
    if coup.winner is Hand.PLAYER:
        return Ruling(Outcome.LOSE, cat)
    if rules.variant is BaccaratVariant.EZ and coup.is_dragon_7:
        return Ruling(Outcome.PUSH, "dragon_7")
    return Ruling(Outcome.WIN, cat, Odds(1), commission_applies=rules.takes_commission)


def rule_dragon_bonus(hand: Hand, coup: Coup, paytable: DragonBonusPaytable) -> Ruling:
    """Rule a Dragon Bonus wager on ``hand`` (§ 631a.8(a)(4)).

    A Natural that beats the other hand (incl. a Natural 9 against a Natural 8) wins ``natural_win``; a
    Natural tie pushes (``natural_tie``); a non-natural hand that wins by 4 to 9 points wins
    ``win_by_N``; anything else (Natural 8 against Natural 9, a non-natural loss, tie or win by 1-3, any
    hand against a Natural) loses (``lose``).
    """
    other = Hand.BANKER if hand is Hand.PLAYER else Hand.PLAYER
    mine, theirs = coup.points(hand), coup.points(other)
    if coup.natural(hand):
        if mine > theirs:
            return Ruling(Outcome.WIN, "natural_win", paytable.natural_win)
        if mine == theirs:
            return Ruling(Outcome.PUSH, "natural_tie")
        return Ruling(Outcome.LOSE, _LOSE)
    if coup.natural(other) or mine <= theirs:
        return Ruling(Outcome.LOSE, _LOSE)
    margin = mine - theirs
    odds = paytable.odds_for_margin(margin)
    return Ruling(Outcome.WIN, f"win_by_{margin}", odds) if odds else Ruling(Outcome.LOSE, _LOSE)


def rule_perfect_pairs(first: Card, second: Card, paytable: PairPaytable) -> Ruling:
    """Rule a Perfect Pairs wager on a hand's first two cards (§ 627c.1(b)-(e)): ``perfect_pair``,
    ``colored_pair`` or ``mixed_pair`` at the paytable's odds, else lose (``no_pair``)."""
    kind = classify_pair(first, second)
    if kind is None:
        return Ruling(Outcome.LOSE, _NO_PAIR)
    return Ruling(Outcome.WIN, kind.value, paytable.odds(kind))


def rule_house_money(player_two: Sequence[Card], banker_two: Sequence[Card],
                     paytable: HouseMoneyPaytable) -> Ruling:
    """Rule a House Money wager on the first two cards of each hand (§ 631a.8(a)(7)).

    A pair is two cards of the same rank, any suits. Both hands paired: ``both_pairs``; one: ``one_pair``;
    neither: lose (``no_pair``).
    """
    pairs = int(is_pair(player_two[0], player_two[1])) + int(is_pair(banker_two[0], banker_two[1]))
    if pairs == 2:
        return Ruling(Outcome.WIN, "both_pairs", paytable.both_pairs)
    if pairs == 1:
        return Ruling(Outcome.WIN, "one_pair", paytable.one_pair)
    return Ruling(Outcome.LOSE, _NO_PAIR)


# --------------------------------------------------------------------------------------------- settling

_TWO_CARD_BETS = (Bet.PERFECT_PAIRS, Bet.HOUSE_MONEY)
_HAND_BETS = (Bet.PERFECT_PAIRS, Bet.DRAGON_BONUS)


def _check_wager(wager: Wager, rules: BaccaratRules) -> None:
    if not isinstance(wager, Wager):
        raise TypeError(f"expected a Wager, got {type(wager).__name__}")
    bet = wager.bet
    if not rules.offers(bet):
        raise WagerNotOffered(f"spot {wager.spot}: {bet.value} is not offered at {rules.variant.value}")
    if bet in _HAND_BETS:
        if wager.hand is None:
            raise WagerNotOffered(f"spot {wager.spot}: {bet.value} needs a hand (player or banker)")
    elif bet in (Bet.PLAYER, Bet.BANKER):
        if wager.hand is not None and wager.hand.value != bet.value:
            raise WagerNotOffered(f"spot {wager.spot}: {bet.value} cannot name the {wager.hand.value} hand")
    elif wager.hand is not None:
        raise WagerNotOffered(f"spot {wager.spot}: {bet.value} is not placed on a hand "
                              f"(got hand {wager.hand.value})")


def _take_from_shoe(cards: Sequence[Card], decks: int) -> None:
    shoe = ShoeComposition(decks)
    for c in cards:
        if not isinstance(c, Card):
            raise TypeError(f"expected Card objects, got {type(c).__name__}")
        shoe.take(c)


def _rule_two_card(wager: Wager, first_four: Sequence[Card], rules: BaccaratRules) -> Ruling:
    player_two, banker_two = (first_four[0], first_four[2]), (first_four[1], first_four[3])
    if wager.bet is Bet.HOUSE_MONEY:
        return rule_house_money(player_two, banker_two, rules.house_money)
    two = player_two if wager.hand is Hand.PLAYER else banker_two
    return rule_perfect_pairs(two[0], two[1], rules.perfect_pairs)


def settle_two_card_wagers(first_four: Sequence[Card], wagers: Sequence[Wager],
                           rules: BaccaratRules) -> list[Settlement]:
    """Settle Perfect Pairs and House Money wagers once the first four cards are known (§ 627a.8(d),
    § 627c.1(c)): the Player hand is cards 1 and 3, the Banker hand cards 2 and 4.

    Args:
        first_four: exactly the round's first four cards in draw order.
        wagers: Perfect Pairs (with a hand) and House Money wagers only.
        rules: the table's rules (deck count, paytables).

    Returns:
        One :class:`Settlement` per wager, in the order given; the same as :func:`settle_baccarat` gives
        for these wagers.

    Raises:
        IncompleteRound: fewer than four cards, or a wager that needs the complete round.
        TooManyCards: more than four cards.
        CardNotInShoe: a card the shoe cannot hold (e.g. two A♠ from one deck).
        WagerNotOffered: a wager the table does not offer, or Perfect Pairs without a hand.
    """
    first_four = tuple(first_four)
    if len(first_four) < 4:
        raise IncompleteRound(f"two-card wagers settle on the first 4 cards, got {len(first_four)}")
    if len(first_four) > 4:
        raise TooManyCards(f"two-card wagers settle on exactly the first 4 cards, got {len(first_four)}")
    for w in wagers:
        _check_wager(w, rules)
        if w.bet not in _TWO_CARD_BETS:
            raise IncompleteRound(f"spot {w.spot}: {w.bet.value} needs the complete round; "
                                  "only perfect_pairs and house_money settle on the first 4 cards")
    _take_from_shoe(first_four, rules.decks)
    return [_rule_two_card(w, first_four, rules).settle(w, rules) for w in wagers]


def settle_baccarat(cards: Sequence[Card], wagers: Sequence[Wager], rules: BaccaratRules) -> list[Settlement]:
    """Settle every wager of a completed round.

    Args:
        cards: all cards of the round in draw order, burn cards excluded (4 to 6).
        wagers: the round's wagers, any bets ``rules`` offers.
        rules: the table's rules submission.

    Returns:
        One :class:`Settlement` per wager, in the order given, each with its odds and exact ``net`` in
        minor units (Banker commission deducted and recorded in ``commission``).

    Raises:
        WagerNotOffered: a bet the table does not offer (e.g. ``dragon_7`` on standard baccarat), or a
            Perfect Pairs / Dragon Bonus wager without a hand.
        CardNotInShoe: a card ``ShoeComposition(rules.decks)`` cannot hold.
        IncompleteRound / TooManyCards: fewer or more cards than § 631a.11 deals.
    """
    cards = tuple(cards)
    for w in wagers:
        _check_wager(w, rules)
    _take_from_shoe(cards, rules.decks)
    coup = coup_from_cards(cards)
    out: list[Settlement] = []
    for w in wagers:
        if w.bet in _TWO_CARD_BETS:
            ruling = _rule_two_card(w, cards[:4], rules)
        elif w.bet is Bet.DRAGON_BONUS:
            assert w.hand is not None
            ruling = rule_dragon_bonus(w.hand, coup, rules.dragon_bonus)
        else:
            ruling = rule_main_wager(w.bet, coup, rules)
        out.append(ruling.settle(w, rules))
    return out
