"""One reconnect backoff for every link tablesense keeps open (the broker, the devices, signage's feed).

Exponential backoff with *full jitter* (M. Brooker, "Exponential Backoff And Jitter", AWS Architecture
Blog, 2015): after the n-th consecutive failure (n = 1, 2, ...) the caller waits a delay drawn uniformly
from ``[floor, ceiling_n]`` where ``ceiling_n = min(maximum, initial * 2 ** (n - 1))`` (and ``floor``
defaults to 0, the textbook form). Full jitter spreads many clients that failed together (a broker
restart seen by every table of a floor) over the whole window instead of retrying in lock step, and its
mean delay is half of equal jitter's upper half.

``maximum`` bounds what an outage can grow the delay to: once the network or the peer is back, the next
attempt is at most ``maximum`` seconds away. Keep it a few seconds for links a table cannot work without
(tablesense's MQTT relay uses 5 s).

Pure: no I/O, no clock; the random source is injectable (a seeded :class:`random.Random` in tests).

Usage::

    backoff = Backoff(initial=0.2, maximum=5.0)
    while True:
        try:
            await connect_and_serve()      # returns or raises when the link is lost
        except ConnectionError:
            pass
        else:
            backoff.reset()                # a session that worked: start small again
        await asyncio.sleep(backoff.next_delay())

or, for code that counts its own attempts, :func:`full_jitter_delay`.
"""

from __future__ import annotations

import random

__all__ = ["Backoff", "full_jitter_delay"]

_MAX_DOUBLINGS = 62
"""``2 ** n`` is never computed beyond this (the ceiling is long since capped at ``maximum``)."""


def _check(initial: float, maximum: float, floor: float) -> None:
    if not (initial > 0 and maximum >= initial and 0 <= floor <= maximum):
        raise ValueError(f"backoff needs 0 < initial <= maximum and 0 <= floor <= maximum "
                         f"(got initial={initial!r}, maximum={maximum!r}, floor={floor!r})")


def full_jitter_delay(attempt: int, initial: float, maximum: float, *, floor: float = 0.0,
                      rng: random.Random | None = None) -> float:
    """The delay in seconds before retrying after the ``attempt``-th consecutive failure (1-based).

    Drawn uniformly from ``[floor, max(floor, min(maximum, initial * 2 ** (attempt - 1)))]``. An
    ``attempt`` below 1 counts as 1. ``rng``: the random source (default: the ``random`` module's).

    Raises:
        ValueError: unless ``0 < initial <= maximum`` and ``0 <= floor <= maximum``.
    """
    _check(initial, maximum, floor)
    n = min(max(int(attempt), 1) - 1, _MAX_DOUBLINGS)
    ceiling = max(floor, min(maximum, initial * float(2 ** n)))
    return (rng or random).uniform(floor, ceiling)


class Backoff:
    """Consecutive-failure state of one link: :meth:`next_delay` after each failure, :meth:`reset` after a
    success.

    Args:
        initial: the first failure's ceiling, seconds (> 0).
        maximum: the largest ceiling, seconds (>= ``initial``); no delay is ever longer.
        floor: the shortest delay, seconds (default 0: full jitter as published). A floor keeps a retry
            from coming back at once where that is the point (e.g. after another client took our MQTT
            session over, the other side must have time to act first).
        rng: random source (tests pass a seeded ``random.Random``).

    Attributes:
        failures: consecutive failures counted by :meth:`next_delay` since the last :meth:`reset`.

    Raises:
        ValueError: unless ``0 < initial <= maximum`` and ``0 <= floor <= maximum``.
    """

    def __init__(self, initial: float, maximum: float, *, floor: float = 0.0,
                 rng: random.Random | None = None) -> None:
        _check(initial, maximum, floor)
        self.initial = float(initial)
        self.maximum = float(maximum)
        self.floor = float(floor)
        self._rng = rng or random.Random()
        self.failures = 0

    @property
    def ceiling(self) -> float:
        """The upper bound of the next delay (seconds), before it is drawn."""
        n = min(self.failures, _MAX_DOUBLINGS)
        return max(self.floor, min(self.maximum, self.initial * float(2 ** n)))

    def next_delay(self) -> float:
        """Count one more failure and return the delay to wait before the next attempt (seconds)."""
        self.failures += 1
        return full_jitter_delay(self.failures, self.initial, self.maximum, floor=self.floor, rng=self._rng)

    def reset(self) -> None:
        """A success: the next failure starts again from ``initial``."""
        self.failures = 0
