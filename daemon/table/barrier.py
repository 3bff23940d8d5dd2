"""The information barrier, in one place: what of a round signage may see.

No public channel (status, round, results, settlements, alarms, devices) ever carries a face-down card:
the blackjack hole card (and later blackjack cards), UTH hands and board before the reveal, burn cards.
:func:`public_cards` and :func:`public_outcome` are the only ways the machine builds public card lists;
the full record goes to ``floor/rounds`` only once the round is complete.
"""

from __future__ import annotations

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
    named = [c for box in out.boxes for c in box.cards]
    named += out.dealer
    named += out.board
    if out.baccarat is not None:
        named += out.baccarat.player
        named += out.baccarat.banker
    allowed: dict[str, int] = {}
    for p in public_cards(game):
        allowed[p.card] = allowed.get(p.card, 0) + 1
    for c in named:  # each card named uses up one public copy of it
        left = allowed.get(c, 0)
        if not left:
            return Outcome()
        allowed[c] = left - 1
    return out
