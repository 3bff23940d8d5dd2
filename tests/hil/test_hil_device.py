"""Hardware-in-the-loop checks: the same link checks as the pty tests, against a real device.

Run against a shoe or pads on the bench::

    pytest tests/hil -m hil --device-url /dev/serial/by-id/usb-ACME_Shoe_123-if00-port0
    TABLESENSE_HIL_URL=socket://10.0.0.7:4001 pytest tests/hil -m hil

Optional environment: ``TABLESENSE_HIL_PROTOCOL`` (default ``tsref``), ``TABLESENSE_HIL_BAUD`` (9600),
``TABLESENSE_HIL_DECKS`` (8), ``TABLESENSE_HIL_EVENTS`` (events to wait for, 8),
``TABLESENSE_HIL_TIMEOUT`` (seconds to wait for them, 30). The device must be powered and sending
(heartbeats are enough; a dealing shoe exercises more). Without a URL every test is skipped, saying so.
CI runs this suite against ``tablesense simulate shoe`` started as a separate process
(tests/test_link_hil_ci.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections import Counter
from pathlib import Path

import pytest
import structlog

from tablesense.drivers.events import (
    CardDrawn,
    DeviceEvent,
    DeviceIdentity,
    DeviceState,
    LinkState,
    ShoeStatus,
    ShoeStatusKind,
)
from tablesense.drivers.link import DeviceLink
from tablesense.drivers.protocols.tsref import SEQ_MODULUS

pytestmark = [pytest.mark.hil, pytest.mark.timeout(120)]

PROTOCOL = os.environ.get("TABLESENSE_HIL_PROTOCOL", "tsref")
BAUD = int(os.environ.get("TABLESENSE_HIL_BAUD", "9600"))
DECKS = int(os.environ.get("TABLESENSE_HIL_DECKS", "8"))
EVENTS = int(os.environ.get("TABLESENSE_HIL_EVENTS", "8"))
TIMEOUT = float(os.environ.get("TABLESENSE_HIL_TIMEOUT", "30"))


@pytest.fixture
def device_url(request: pytest.FixtureRequest) -> str:
    url = request.config.getoption("--device-url", default=None) or os.environ.get("TABLESENSE_HIL_URL")
    if not url:
        pytest.skip("hardware-in-the-loop: no device given (pass --device-url URL or set TABLESENSE_HIL_URL)")
    return str(url)


@pytest.fixture(autouse=True)
def _quiet_logs() -> None:
    structlog.reset_defaults()


class Session:
    """One DeviceLink session against the device, recording what it queues."""

    def __init__(self, url: str, baud: int = BAUD, **kwargs: object) -> None:
        self.queue: asyncio.Queue[DeviceEvent | DeviceState] = asyncio.Queue()
        self.link = DeviceLink("hil", url, PROTOCOL, baud=baud, queue=self.queue, backoff_initial=0.1,
                               backoff_max=1.0, **kwargs)  # type: ignore[arg-type]
        self.items: list[DeviceEvent | DeviceState] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def events(self) -> list[DeviceEvent]:
        return [i for i in self.items if not isinstance(i, DeviceState)]

    async def __aenter__(self) -> Session:
        self._task = asyncio.create_task(self.link.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        while not self.queue.empty():
            self.items.append(self.queue.get_nowait())

    async def until(self, cond: object, what: str, bound: float = TIMEOUT) -> None:
        assert callable(cond)
        loop = asyncio.get_running_loop()
        end = loop.time() + bound
        while not cond():
            left = end - loop.time()
            if left <= 0:
                raise AssertionError(f"{what}: not seen within {bound:g} s (link {self.link.state.value}: "
                                     f"{self.link.detail}; {self.link.stats})")
            with contextlib.suppress(TimeoutError):
                self.items.append(await asyncio.wait_for(self.queue.get(), min(left, 0.2)))


def _is_pty(url: str) -> bool:
    return "://" not in url and os.path.realpath(url).startswith("/dev/pts/")


async def test_link_comes_online_and_decodes_clean_frames(device_url: str) -> None:
    async with Session(device_url) as s:
        await s.until(lambda: s.link.state is LinkState.ONLINE, "link online")
        await s.until(lambda: len(s.events) >= EVENTS, f"{EVENTS} decoded events")
    stats = s.link.stats
    assert stats.bad_checksum == 0, f"bad checksums on a healthy line: {stats}"
    assert stats.too_long == 0 and stats.unknown_type == 0, stats
    assert all(e.device == "hil" for e in s.events)


async def test_status_request_is_answered_with_identity(device_url: str) -> None:
    async with Session(device_url, status_on_connect=True) as s:
        await s.until(lambda: any(isinstance(e, DeviceIdentity) for e in s.events), "identity after $SQ")
    ident = next(e for e in s.events if isinstance(e, DeviceIdentity))
    assert ident.vendor and ident.model and ident.serial and ident.firmware


async def test_sequence_numbers_run_without_gaps(device_url: str) -> None:
    async with Session(device_url) as s:
        await s.until(lambda: len(s.events) >= EVENTS, f"{EVENTS} events")
    seqs = [e.seq for e in s.events]
    steps = [(b - a) % SEQ_MODULUS for a, b in itertools.pairwise(seqs)]
    assert all(step == 1 for step in steps), f"sequence gaps or repeats in {seqs}"
    assert s.link.stats.seq_gaps == 0


async def test_reopening_mid_stream_never_yields_a_phantom_card(device_url: str) -> None:
    seen: dict[int, object] = {}
    last_seq = -1
    for round_no in range(3):
        async with Session(device_url) as s:
            await s.until(lambda: len(s.events) >= EVENTS, f"session {round_no}: {EVENTS} events")
        for e in s.events:
            if isinstance(e, CardDrawn):
                assert seen.setdefault(e.seq, e.card) == e.card, f"seq {e.seq} changed card"
        assert s.link.connects == 1
        first = s.events[0].seq
        if last_seq >= 0:
            assert (first - last_seq) % SEQ_MODULUS < SEQ_MODULUS // 2, "an old frame came back as new"
        last_seq = s.events[-1].seq


async def test_cards_never_exceed_what_the_shoe_holds(device_url: str) -> None:
    async with Session(device_url) as s:
        await s.until(lambda: len(s.events) >= EVENTS * 2, f"{EVENTS * 2} events")
    counts: Counter[object] = Counter()
    for e in s.events:
        if isinstance(e, ShoeStatus) and e.kind is ShoeStatusKind.NEW_SHOE:
            counts.clear()
        elif isinstance(e, CardDrawn):
            counts[e.card] += 1
            assert counts[e.card] <= DECKS, f"{e.card} seen {counts[e.card]} times in a {DECKS}-deck shoe"


async def test_wrong_baud_rate_yields_no_cards(device_url: str) -> None:
    if "://" in device_url or _is_pty(device_url):
        pytest.skip("baud rate only matters on a real serial line (pty and network URLs ignore it)")
    if not Path(device_url).exists():
        pytest.skip(f"{device_url} does not exist")
    wrong = 19200 if BAUD != 19200 else 9600
    async with Session(device_url, baud=wrong, status_on_connect=False) as s:
        await asyncio.sleep(min(TIMEOUT, 10))
        await s.until(lambda: True, "drain")
    assert not [e for e in s.events if isinstance(e, CardDrawn)]
