"""A virtual card-reading shoe: shuffled from a seed or scripted, with burn, cut card and empty shoe.

Pure model (no I/O, no clock): each method returns the tsref frames the shoe would send; the pty,
TCP and USB wrappers (and ``tablesense simulate shoe``) write them out at a dealing pace.

Shoe procedure (rules.md §1.3, common practice, not PA-specific): the dealer turns the first card of a
new shoe face up and burns as many further cards face down as its baccarat value, a 10 or face card
(value 0) burning 10; the cut card sits 16 cards from the end (WoO); when it comes out the round is
finished, one more is played, and the shoe ends.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Literal

from tablesense.daemon.rules.cards import ALL_CARDS, Card, ShoeComposition
from tablesense.drivers.events import CardDrawn, CardUnreadable, ShoeStatus, ShoeStatusKind
from tablesense.simulators.device_model import VirtualDevice

__all__ = ["DEFAULT_CUT_CARD_AT", "BurnRule", "VirtualShoe", "burn_count"]

DEFAULT_CUT_CARD_AT = 16
"""Cards left behind the cut card in a shuffled shoe (rules.md §1.3, WoO: 16 from the end)."""

BurnRule = Literal["rule"] | int | None
"""``"rule"``: first card face up, then its baccarat value more (value 0 burns 10); an int: burn that
many cards face down; ``None``: no burn."""


def burn_count(first: Card) -> int:
    """Cards burned face down after the exposed first card: its baccarat value, or 10 for a value of 0.

    Source: rules.md §1.3 (rules sheet reproducing WoO). Returns 1..10.
    """
    value = first.rank.baccarat_value
    return 10 if value == 0 else value


class VirtualShoe(VirtualDevice):
    """A card-reading shoe of ``decks`` decks.

    Args:
        decks: 1..8 standard 52-card decks.
        seed: seed of the ``random.Random`` that shuffles (same seed, same shoes, shoe after shoe).
        cards: an exact scripted sequence of cards (``Card`` or text such as ``"QH"``) to come out
            instead of a shuffle; it must fit the shoe (no more copies of a card than ``decks``).
        burn: the start-of-shoe burn (:data:`BurnRule`); ``"default"`` means ``"rule"`` for a shuffled
            shoe and ``None`` for a scripted one.
        cut_card_at: cards left behind the cut card; ``"default"`` means 16 for a shuffled shoe and
            ``None`` (no cut card) for a scripted one.
        report_burned_faces: when true the shoe reports the identity of face-down burned cards too
            (the first, face-up burn card is always reported).
        device, vendor, model, firmware, serial, start_seq, session: see :class:`VirtualDevice`.

    Raises:
        ValueError: bad ``decks``, ``burn`` or ``cut_card_at``.
        daemon.rules.cards.CardNotInShoe: the script holds more copies of a card than the shoe can.
        daemon.rules.cards.InvalidCard: a scripted card cannot be read.

    The shoe starts unloaded: call :meth:`start_shoe` (new shoe + burn) or :meth:`new_shoe` first.
    """

    def __init__(self, decks: int = 8, seed: int | None = None, cards: Iterable[Card | str] | None = None,
                 burn: BurnRule | Literal["default"] = "default",
                 cut_card_at: int | Literal["default"] | None = "default", *,
                 report_burned_faces: bool = False, device: str = "shoe", vendor: str = "tablesense",
                 model: str = "virtual-shoe", firmware: str = "1.0", serial: str = "VS-0001",
                 start_seq: int = 0,
                 session: str | None = None) -> None:
        super().__init__(device=device, vendor=vendor, model=model, firmware=firmware, serial=serial,
                         start_seq=start_seq, session=session)
        self.decks = ShoeComposition(decks).decks  # validates 1..8
        self._rng = random.Random(seed)
        self.script: list[Card] | None = None
        if cards is not None:
            self.script = [c if isinstance(c, Card) else Card.parse(c) for c in cards]
            check = ShoeComposition(decks)
            for c in self.script:
                check.take(c)
        scripted = self.script is not None
        if burn == "default":
            burn = None if scripted else "rule"
        if not (burn is None or burn == "rule" or (isinstance(burn, int) and not isinstance(burn, bool)
                                                     and burn >= 0)):
            raise ValueError(f"burn must be 'rule', a number of cards >= 0 or None, got {burn!r}")
        self.burn_rule: BurnRule = burn
        if cut_card_at == "default":
            cut_card_at = None if scripted else DEFAULT_CUT_CARD_AT
        if cut_card_at is not None and (not isinstance(cut_card_at, int) or isinstance(cut_card_at, bool)
                                        or not 0 < cut_card_at < 52 * decks):
            raise ValueError(f"cut_card_at must be 1..{52 * decks - 1} cards from the end, "
                             f"got {cut_card_at!r}")
        self.cut_card_at: int | None = cut_card_at
        self.report_burned_faces = report_burned_faces
        self.lid_open = False
        self.loaded = False
        self.cut_card_out = False
        self.shoes = 0
        self.burned: list[Card] = []
        self.dealt: list[Card] = []
        self.last_round: list[Card] = []
        self._order: list[Card] = []
        self._pos = 0

    # -- shoe contents ------------------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        """Cards still in the shoe."""
        return len(self._order) - self._pos

    @property
    def next_card(self) -> Card | None:
        """The card that would come out next (``None`` when empty). Test helper: a real shoe cannot know."""
        return self._order[self._pos] if self._pos < len(self._order) else None

    def upcoming(self) -> Sequence[Card]:
        """The cards still in the shoe, in draw order (test helper)."""
        return self._order[self._pos:]

    def _take(self) -> Card | None:
        if self._pos >= len(self._order):
            return None
        card = self._order[self._pos]
        self._pos += 1
        return card

    # -- frames -------------------------------------------------------------------------------------

    def _status(self, kind: ShoeStatusKind, card: Card | None = None) -> bytes:
        return self.emit(lambda s: ShoeStatus(self.device, s, kind, card))

    def new_shoe(self) -> bytes:
        """Load a freshly shuffled shoe (or the script again) and send ``$NS``."""
        if self.script is not None:
            self._order = list(self.script)
        else:
            self._order = [c for c in ALL_CARDS for _ in range(self.decks)]
            self._rng.shuffle(self._order)
        self._pos = 0
        self.loaded = True
        self.cut_card_out = False
        self.shoes += 1
        self.burned = []
        self.dealt = []
        return self._status(ShoeStatusKind.NEW_SHOE)

    def burn(self) -> bytes:
        """The start-of-shoe burn per :attr:`burn_rule`: one ``$BN`` frame per burned card.

        With ``"rule"`` the first card is shown (``$BN,<seq>,<card>``) and :func:`burn_count` more go
        face down. Burned cards are never part of a round.
        """
        if self.burn_rule is None:
            return b""
        out = b""
        if self.burn_rule == "rule":
            first = self._take_for_burn()
            if first is None:
                return self._empty_frame()
            out += self._status(ShoeStatusKind.BURN, first)
            count = burn_count(first)
        else:
            count = int(self.burn_rule)
        for _ in range(count):
            card = self._take_for_burn()
            if card is None:
                return out + self._empty_frame()
            out += self._status(ShoeStatusKind.BURN, card if self.report_burned_faces else None)
        return out

    def _take_for_burn(self) -> Card | None:
        card = self._take()
        if card is not None:
            self.burned.append(card)
        return card

    def _empty_frame(self) -> bytes:
        return self._status(ShoeStatusKind.EMPTY)

    def start_shoe(self) -> bytes:
        """A new shoe followed by its burn: ``$NS`` then the ``$BN`` frames."""
        return self.new_shoe() + self.burn()

    def _cut_card_due(self) -> bool:
        return (self.cut_card_at is not None and not self.cut_card_out
                and self.remaining <= self.cut_card_at)

    def draw(self) -> bytes:
        """The dealer draws one card: ``$CD``. Sends ``$CC`` first when the cut card comes out ahead of
        this card, and ``$EM`` after the last card. On an empty shoe only ``$EM`` is sent."""
        return self._draw(readable=True)

    def draw_unreadable(self) -> bytes:
        """The next card comes out but cannot be read: ``$CU`` (the card is still gone from the shoe)."""
        return self._draw(readable=False)

    def _draw(self, *, readable: bool) -> bytes:
        if self.remaining == 0:
            return self._empty_frame()
        out = b""
        if self._cut_card_due():
            self.cut_card_out = True
            out += self._status(ShoeStatusKind.CUT_CARD)
        card = self._take()
        assert card is not None
        self.dealt.append(card)
        if readable:
            out += self.emit(lambda s: CardDrawn(self.device, s, card))
        else:
            out += self.emit(lambda s: CardUnreadable(self.device, s))
        if self.remaining == 0:
            out += self._empty_frame()
        return out

    def deal(self, n: int) -> bytes:
        """Draw ``n`` cards (stops early at an empty shoe)."""
        out = b""
        for _ in range(n):
            if self.remaining == 0:
                break
            out += self.draw()
        return out

    def deal_baccarat_round(self) -> bytes:
        """Deal one baccarat round: 4 cards, then third cards per the drawing rules (58 Pa. Code § 631a.11,
        via :func:`daemon.rules.baccarat.next_card_hand`). The round's cards go to :attr:`last_round`.
        Stops early when the shoe runs out."""
        from tablesense.daemon.rules.baccarat import next_card_hand

        self.last_round = []
        out = b""
        while self.remaining and next_card_hand(self.last_round) is not None:
            card = self.next_card
            assert card is not None
            out += self.draw()
            self.last_round.append(card)
        return out

    def inject_card(self, card: Card | str) -> bytes:
        """Fault: send a ``$CD`` for ``card`` without taking it from the shoe (e.g. a card it cannot hold)."""
        c = card if isinstance(card, Card) else Card.parse(card)
        return self.emit(lambda s: CardDrawn(self.device, s, c))

    def open_lid(self) -> bytes:
        """The lid/door opens: ``$LO``."""
        self.lid_open = True
        return self._status(ShoeStatusKind.LID_OPEN)

    def close_lid(self) -> bytes:
        """The lid/door closes: ``$LC``."""
        self.lid_open = False
        return self._status(ShoeStatusKind.LID_CLOSED)

    def state_frames(self) -> bytes:
        """After the identity in a status answer: the lid state (``$LO`` or ``$LC``)."""
        return self._status(ShoeStatusKind.LID_OPEN if self.lid_open else ShoeStatusKind.LID_CLOSED)
