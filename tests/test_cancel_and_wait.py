"""``drivers.waits.cancel_and_wait``: a task that swallowed a cancellation (as ``asyncio.wait_for`` does on
Python 3.11 inside aiomqtt) is cancelled again until it ends; one that never ends is returned, never
awaited for ever."""

from __future__ import annotations

import asyncio

from tablesense.drivers.waits import cancel_and_wait


async def _swallows_once(swallowed: list[bool]) -> None:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        swallowed.append(True)  # as a wait_for that returned its result instead of raising
    await asyncio.sleep(3600)  # then waits for ever, as for the next message


async def _never_ends(released: asyncio.Event) -> None:
    while not released.is_set():
        try:
            await released.wait()
        except asyncio.CancelledError:
            continue


async def test_a_swallowed_cancellation_is_repeated_until_the_task_ends() -> None:
    swallowed: list[bool] = []
    task = asyncio.ensure_future(_swallows_once(swallowed))
    await asyncio.sleep(0)
    plain = asyncio.ensure_future(asyncio.sleep(3600))
    stuck = await cancel_and_wait([task, plain], every=0.05, give_up=5)
    assert stuck == set() and task.cancelled() and plain.cancelled() and swallowed == [True]


async def test_a_task_that_never_ends_is_returned_after_give_up() -> None:
    released = asyncio.Event()
    task = asyncio.ensure_future(_never_ends(released))
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    began = loop.time()
    stuck = await cancel_and_wait([task], every=0.05, give_up=0.3)
    assert stuck == {task} and not task.done() and loop.time() - began < 2
    released.set()  # clean up
    await task


async def test_done_tasks_are_left_as_they_are() -> None:
    async def result() -> int:
        return 7

    task = asyncio.ensure_future(result())
    await task
    assert await cancel_and_wait([task]) == set() and task.result() == 7
