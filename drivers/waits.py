"""Bounded waits that never lose a cancellation, for every loop tablesense keeps running.

On Python 3.11 ``asyncio.wait_for`` swallows a cancellation that arrives in the same loop turn as the
awaited thing completes: it returns the result and the task goes on as if never cancelled (CPython
gh-86296, "AsyncIO's wait_for can hide cancellation in a rare race condition"; fixed in 3.12 by
re-implementing ``wait_for`` on ``asyncio.timeout``, CPython gh-96764). A loop whose task was
cancelled that way waits again, and whoever awaits its end (a session tearing down its tasks, a
shutdown) waits for ever: the MQTT relay once stayed connected to nothing, never reconnecting, when the
broker closed its session just as new rows woke it.

:func:`wait_at_most` is ``asyncio.wait_for`` built on ``asyncio.timeout`` (Python >= 3.11), which
delivers the cancellation to the awaiting task itself, so it is raised whatever else completed. The
libraries tablesense runs on still use ``asyncio.wait_for`` (aiomqtt's ``subscribe`` and ``publish``):
:func:`cancel_and_wait` stops a task that may be inside one, cancelling it again until it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

__all__ = ["cancel_and_wait", "wait_at_most"]

T = TypeVar("T")
F = TypeVar("F", bound="asyncio.Future[Any]")


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


async def cancel_and_wait(tasks: Iterable[F], *, every: float = 0.5, give_up: float = 10.0) -> set[F]:
    """Cancel ``tasks`` and wait for them to end, cancelling those still running again every ``every``
    seconds (a cancellation swallowed by ``asyncio.wait_for`` on Python 3.11, CPython gh-86296, inside a
    library: aiomqtt's ``subscribe`` cancelled as its SUBACK arrives goes on to wait for messages for
    ever), for at most ``give_up`` seconds in all. Their results and exceptions are left unread (a
    cancelled task's ``CancelledError`` too). Returns the tasks still running at the end (empty when all
    ended), for the caller to log; they are left behind, never awaited."""
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up
    while pending:
        for t in pending:
            t.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(every, left))
    return pending
