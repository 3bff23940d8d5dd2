"""Bounded waits that never lose a cancellation, for every loop tablesense keeps running.

On Python 3.11 ``asyncio.wait_for`` swallows a cancellation that arrives in the same loop turn as the
awaited thing completes: it returns the result and the task goes on as if never cancelled (CPython
gh-86296, "AsyncIO's wait_for can hide cancellation in a rare race condition"; fixed in 3.12 by
re-implementing ``wait_for`` on ``asyncio.timeout``, CPython gh-96764). A loop whose task was
cancelled that way waits again, and whoever awaits its end (a session tearing down its tasks, a
shutdown) waits for ever: the MQTT relay once stayed connected to nothing, never reconnecting, when the
broker closed its session just as new rows woke it.

:func:`wait_at_most` is ``asyncio.wait_for`` built on ``asyncio.timeout`` (Python >= 3.11), which
delivers the cancellation to the awaiting task itself, so it is raised whatever else completed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["wait_at_most"]

T = TypeVar("T")


async def wait_at_most(aw: Awaitable[T], timeout: float | None) -> T:
    """Await ``aw`` for at most ``timeout`` seconds (``None``: no limit; ``<= 0``: only what is ready
    without waiting); return its result.

    Raises ``TimeoutError`` when the time is up (``aw`` is then cancelled: wrap it in
    ``asyncio.shield`` to keep it running), ``asyncio.CancelledError`` when the calling task is cancelled
    -- also when ``aw`` completes in the same loop turn, unlike ``asyncio.wait_for`` on 3.11 -- and
    whatever ``aw`` raises.
    """
    async with asyncio.timeout(None if timeout is None else max(timeout, 0.0)):
        return await aw
