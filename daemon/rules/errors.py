"""Errors raised by the rules core. Each message is one line naming what is wrong."""

from __future__ import annotations

__all__ = ["IncompleteRound", "RulesError", "TooManyCards", "WagerNotOffered"]


class RulesError(ValueError):
    """Base class of every rules-core error about a round or a wager."""


class WagerNotOffered(RulesError):
    """A wager the game does not offer (e.g. ``dragon_7`` on a standard baccarat table)."""


class IncompleteRound(RulesError):
    """Too few cards to settle the round (e.g. three cards of a baccarat round that needs four)."""


class TooManyCards(RulesError):
    """More cards than the rules call for (a card beyond what § 631a.11 deals)."""
