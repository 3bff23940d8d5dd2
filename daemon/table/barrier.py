"""The information barrier, in one place: what of a round signage may see.

No public channel (status, round, results, settlements, alarms, devices) ever carries a face-down card:
the blackjack hole card (and later blackjack cards), UTH hands and board before the reveal, burn cards.
:func:`public_cards` and :func:`public_outcome` are the only ways the machine builds public card lists;
the full record goes to ``floor/rounds`` only once the round is complete.
"""

from __future__ import annotations

from collections import Counter

from tablesense.daemon.messages import PublicCard
from tablesense.daemon.table.game import BURN, Face, GameRound, Outcome, Slot

__all__ = ["is_public", "public_cards", "public_outcome"]


def is_public(slot: Slot, revealed: bool) -> bool:
    """True when ``slot``'s card may be shown: face up, or face down until a reveal that has happened."""
    if slot.card is None or slot.position == BURN:
        return False
    return slot.face is Face.UP or (slot.face is Face.REVEAL and revealed)


def public_cards(game: GameRound | None) -> tuple[PublicCard, ...]:
    """The round's public cards in draw order."""
    if game is None:
        return ()
    cards: tuple[PublicCard, ...] = game.public_cards(_public_cards)
    return cards


def _public_cards(game: GameRound) -> tuple[PublicCard, ...]:
    return tuple(PublicCard(index=s.index, card=str(s.card), position=s.position)
                 for s in game.slots if is_public(s, game.revealed))


def public_outcome(game: GameRound | None) -> Outcome:
    """The game's public results, checked card by card against the public cards: an outcome naming any
    card that is not public is never returned (an empty outcome is, instead)."""
    if game is None:
        return Outcome()
    out = game.outcome(public=True)
    allowed = Counter(c.card for c in public_cards(game))
    named: Counter[str] = Counter()
    for box in out.boxes:
        named.update(box.cards)
    named.update(out.dealer)
    named.update(out.board)
    if out.baccarat is not None:
        named.update(out.baccarat.player)
        named.update(out.baccarat.banker)
    if any(n > allowed[c] for c, n in named.items()):
        return Outcome()
    return out
