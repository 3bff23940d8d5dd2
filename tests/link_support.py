"""Shared helpers for the transport / device-link tests: a link plus a simulator, and bounded waits.

Waits are failure bounds (a broken link would otherwise hang the test), never speed assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from tablesense.drivers.events import CardDrawn, DeviceEvent, DeviceState, LinkState
from tablesense.drivers.link import DeviceLink

BOUND = 20.0
"""Seconds after which a wait gives up and fails the test."""


async def wait_until(cond: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    """Poll ``cond`` until true; fail with ``what`` after ``bound`` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + bound
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"gave up waiting for: {what}")
        await asyncio.sleep(0.01)


@dataclass
class LinkRecorder:
    """Runs a :class:`DeviceLink` and records everything it queues."""

    link: DeviceLink
    queue: asyncio.Queue[DeviceEvent | DeviceState]
    items: list[DeviceEvent | DeviceState] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    _drain: asyncio.Task[None] | None = None

    @property
    def events(self) -> list[DeviceEvent]:
        return [i for i in self.items if not isinstance(i, DeviceState)]

    @property
    def states(self) -> list[DeviceState]:
        return [i for i in self.items if isinstance(i, DeviceState)]

    @property
    def cards(self) -> list[CardDrawn]:
        return [i for i in self.items if isinstance(i, CardDrawn)]

    def of(self, kind: type) -> list[Any]:
        return [i for i in self.items if isinstance(i, kind)]

    async def _consume(self) -> None:
        while True:
            self.items.append(await self.queue.get())

    def start(self) -> None:
        self.task = asyncio.create_task(self.link.run())
        self._drain = asyncio.create_task(self._consume())

    async def stop(self) -> None:
        for t in (self.task, self._drain):
            if t is not None:
                t.cancel()
        await asyncio.gather(*(t for t in (self.task, self._drain) if t is not None), return_exceptions=True)
        while not self.queue.empty():
            self.items.append(self.queue.get_nowait())

    async def wait_state(self, state: LinkState, bound: float = BOUND) -> None:
        await wait_until(lambda: self.link.state is state, f"link state {state.value}", bound)


@contextlib.asynccontextmanager
async def running_link(url: str, name: str = "shoe", **kwargs: Any) -> AsyncIterator[LinkRecorder]:
    """A started link recorder (fast backoff by default), stopped on exit."""
    kwargs.setdefault("backoff_initial", 0.02)
    kwargs.setdefault("backoff_max", 0.2)
    queue: asyncio.Queue[DeviceEvent | DeviceState] = asyncio.Queue()
    rec = LinkRecorder(DeviceLink(name, url, "tsref", queue=queue, **kwargs), queue)
    rec.start()
    try:
        yield rec
    finally:
        await rec.stop()


@contextlib.asynccontextmanager
async def running(coro_task: Any) -> AsyncIterator[asyncio.Task[Any]]:
    """Run a coroutine as a task for the block; cancel and await it on exit."""
    task = asyncio.create_task(coro_task)
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def expected_cards(history: list[DeviceEvent]) -> list[CardDrawn]:
    """The card frames a device sent, in order (from its model's history)."""
    return [e for e in history if isinstance(e, CardDrawn)]
