"""Benchmark: device link latency and recovery over real transports (pty, TCP, virtual USB).

For each transport, a virtual shoe deals ``--cards`` cards one at a time; the time from writing a card
frame on the device side to the decoded ``CardDrawn`` arriving on the DeviceLink queue is measured
(median, p95, max). A second measurement unplugs the device, replugs it ``--gap`` seconds later and
times how long the link takes to be ``online`` again (backoff 0.2 s doubling to 10 s, with jitter).

Run: ``.venv/bin/python benchmarks/bench_link.py [--cards N] [--gap S]``. Not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import structlog

from tablesense.drivers.events import CardDrawn, DeviceEvent, DeviceState, LinkState
from tablesense.drivers.link import DeviceLink
from tablesense.simulators.exposure import Exposure, PtyExposure, TcpExposure, UsbExposure
from tablesense.simulators.shoe import VirtualShoe


async def _latency(exposure: Exposure, cards: int, gap: float) -> tuple[list[float], float]:
    await exposure.start()
    queue: asyncio.Queue[DeviceEvent | DeviceState] = asyncio.Queue()
    link = DeviceLink("shoe", exposure.address, "tsref", queue=queue, status_on_connect=False)
    task = asyncio.create_task(link.run())
    try:
        while link.state is not LinkState.ONLINE:
            await asyncio.sleep(0.005)
        if isinstance(exposure, TcpExposure):
            await exposure.wait_connected()
        shoe = VirtualShoe(decks=8, seed=1, burn=None)
        shoe.new_shoe()
        samples = []
        for _ in range(cards):
            frame = shoe.draw()
            start = time.perf_counter()
            await exposure.write(frame)
            while True:
                item = await queue.get()
                if isinstance(item, CardDrawn):
                    break
            samples.append(time.perf_counter() - start)
        await exposure.unplug()
        while link.state is LinkState.ONLINE:
            await asyncio.sleep(0.001)
        await asyncio.sleep(gap)
        replugged = time.perf_counter()
        await exposure.replug()
        while link.state is not LinkState.ONLINE:
            await asyncio.sleep(0.001)
        recovery = time.perf_counter() - replugged
        return samples, recovery
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await exposure.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=300)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds the device stays unplugged")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    for name, make in (("pty", lambda: PtyExposure(directory=tempfile.mkdtemp())), ("tcp", TcpExposure),
                       ("usb", UsbExposure)):
        samples, recovery = asyncio.run(_latency(make(), args.cards, args.gap))
        ms = sorted(s * 1000 for s in samples)
        p95 = ms[int(len(ms) * 0.95) - 1]
        print(f"{name}: card latency median {statistics.median(ms):.3f} ms, p95 {p95:.3f} ms, "
              f"max {ms[-1]:.3f} ms over {len(ms)} cards; online again {recovery * 1000:.0f} ms "
              f"after a replug following {args.gap:g} s unplugged")


if __name__ == "__main__":
    main()
