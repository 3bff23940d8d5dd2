"""Run a virtual shoe or bet pads over an exposure: dealing pace, heartbeats, faults, unplug and replug.

The models (:mod:`simulators.shoe`, :mod:`simulators.pads`) are pure and return frames; a *program*
is a generator of ``(frames, pause)`` steps built from a model (:func:`shoe_program`,
:func:`pads_program`, :func:`script_program`); :class:`SimulatorRunner` writes each step through an
:mod:`exposure <simulators.exposure>` (pty, TCP, virtual USB), then waits ``pause * pace`` seconds.

Behaviour of the simulated device, as a real one would behave:

* It answers the host: a status request (``$SQ``) gets the identity and state frames; an acknowledge
  (``$AK``) is recorded (:attr:`VirtualDevice.acked`).
* It sends a heartbeat (``$HB``) when it has been quiet for ``heartbeat`` seconds.
* Once the host has acknowledged a frame (it journals and acknowledges: docs/protocol.md §3), the
  device keeps every frame no ``$AK`` covers yet (cumulative) and resends them all, unchanged, when no
  acknowledgement came for ``resend_after`` seconds, and before it answers a status request (the host
  (re)connected: a restarted daemon). So a daemon killed mid-round loses nothing: its successor takes
  the resends and drops what it had already journaled. With ``max_unacked`` frames waiting, the
  program pauses (and no heartbeat is sent) until acknowledgements make room.
* While unplugged it keeps its place (nothing is dealt and nothing is lost). After a replug it resends
  the frames the host may have missed -- everything no acknowledgement covers, or, if the host never
  acknowledges, the last ``resend_window`` frames -- as soon as the host shows up again (its
  first bytes, normally the status request a :class:`~drivers.link.DeviceLink` sends on connect; or a
  new TCP connection), or after ``resend_fallback`` seconds.
* :meth:`SimulatorRunner.power_cycle` restarts the device: a new session, numbering from 0, and the
  unacknowledged frames lost with its memory (docs/protocol.md §4).
* ``start_on_host``: the program starts only once a host has shown up (otherwise the first frames go
  into a port nobody has open).

Fault names (``faults``; the byte transforms are :mod:`simulators.faults`): ``garbage`` (random bytes
between frames), ``split`` (frames written in small pieces with short pauses: partial reads),
``bad-checksum`` (some frames first sent with a wrong checksum, then correctly, as a device
retransmitting), ``repeat`` (some frames sent twice), ``unreadable`` (some card frames become "card
unreadable"), ``impossible-card`` (once, a card more than the shoe can hold), ``wrong-baud`` (what a
UART at the wrong speed would receive), ``unplug`` (unplug for ``unplug_for`` seconds every
``unplug_every`` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import structlog

from tablesense.daemon.rules.cards import Card
from tablesense.simulators import faults as fx
from tablesense.simulators.device_model import VirtualDevice
from tablesense.simulators.exposure import Exposure, TcpExposure
from tablesense.simulators.pads import VirtualPads
from tablesense.simulators.shoe import VirtualShoe

__all__ = ["FAULTS", "SimulatorRunner", "pads_program", "script_program", "shoe_program"]

_log = structlog.get_logger()

FAULTS: dict[str, str] = {
    "garbage": "random bytes between frames",
    "split": "frames written in small pieces with short pauses (partial reads)",
    "bad-checksum": "some frames sent with a wrong checksum, then retransmitted correctly",
    "repeat": "some frames sent twice (same sequence number)",
    "unreadable": "some cards reported as unreadable",
    "impossible-card": "once, a card more than the shoe can hold",
    "wrong-baud": "bytes as a UART at twice the device's baud rate would receive them",
    "unplug": "unplug and replug the device periodically",
}
"""Fault names accepted by :class:`SimulatorRunner` and ``tablesense simulate --fault``."""

Step = tuple[bytes, float]
"""Frames to send and the pause after them, in units of the dealing pace."""


def shoe_program(shoe: VirtualShoe, *, rounds: int | None = None, loop_shoes: bool = True) -> Iterator[Step]:
    """Identity, then shoe after shoe: new shoe and burn, then baccarat rounds card by card.

    Each card is one step (pause 1); a round ends with a pause of 3. The cut card ends the shoe after
    the round in which it came out and one more (rules.md §1.3). ``rounds`` limits the rounds dealt in
    total (``None``: no limit); without ``loop_shoes`` the program ends with the first shoe (a
    scripted shoe ends when the script runs out).
    """
    from tablesense.daemon.rules.baccarat import next_card_hand

    yield shoe.identity(), 1
    dealt_rounds = 0
    while True:
        yield shoe.start_shoe(), 2
        while shoe.remaining and (rounds is None or dealt_rounds < rounds):
            cut_before = shoe.cut_card_out
            cards: list[Card] = []
            while shoe.remaining and next_card_hand(cards) is not None:
                card = shoe.next_card
                assert card is not None
                data = shoe.draw()
                cards.append(card)
                yield data, 1
            dealt_rounds += 1
            yield b"", 3
            if cut_before:
                break
        if not loop_shoes or (rounds is not None and dealt_rounds >= rounds):
            return


def script_program(shoe: VirtualShoe) -> Iterator[Step]:
    """Identity, new shoe, then the shoe's cards one by one (for scripted sequences of any game)."""
    yield shoe.identity(), 1
    yield shoe.start_shoe(), 2
    while shoe.remaining:
        yield shoe.draw(), 1


def pads_program(pads: VirtualPads, rng: random.Random, *, rounds: int | None = None,
                 wagers: Sequence[Mapping[str, int]] | None = None) -> Iterator[Step]:
    """Identity, then rounds of bets, no more bets, round end and clear (pause 2 between phases).

    ``wagers`` scripts the bets of each round (spot -> minor units); otherwise each round a random
    subset of spots gets a random bet of 5, 10, 25 or 50 units of 100 minor units.
    """
    yield pads.identity(), 1
    n = 0
    while rounds is None or n < rounds:
        if wagers is not None:
            if n >= len(wagers):
                return
            bets = dict(wagers[n])
        else:
            chosen = rng.sample(pads.spots, rng.randint(1, len(pads.spots)))
            bets = {spot: rng.choice((500, 1000, 2500, 5000)) for spot in chosen}
        # Phase by phase: each phase's frames are numbered when the runner takes the step (under its
        # lock), so a heartbeat sent between phases never gets a sequence number ahead of them.
        for _phase, data in pads.round_phases(bets):
            yield data, 2
        n += 1


class SimulatorRunner:
    """Drive ``device`` through ``program`` over ``exposure`` (see module docstring).

    Args:
        device: the model (its ``answer`` handles host frames, ``heartbeat`` makes heartbeats).
        exposure: where the bytes go (already constructed; :meth:`run` starts it).
        program: the steps to send.
        pace: seconds per pause unit (0 = as fast as possible).
        faults: fault names from :data:`FAULTS`.
        seed: seeds the fault randomness.
        heartbeat: seconds of silence before a heartbeat; ``None`` = never.
        resend_window: frames resent after a replug when the host never acknowledges.
        resend_after: seconds without an acknowledgement before the unacknowledged frames are resent
            (protocol §3: 1 s); ``None`` = only after a replug or a status request.
        max_unacked: unacknowledged frames kept at most (protocol §3: 64) before the program pauses.
        start_on_host: wait for the host before starting the program.
        unplug_every, unplug_for: timing of the ``unplug`` fault, in seconds.
    """

    def __init__(self, device: VirtualDevice, exposure: Exposure, program: Iterable[Step], *,
                 pace: float = 0.5, faults: Sequence[str] = (), seed: int = 0,
                 heartbeat: float | None = 1.0, resend_window: int = 4, resend_fallback: float = 2.0,
                 resend_after: float | None = 1.0, max_unacked: int = 64,
                 start_on_host: bool = False, unplug_every: float = 10.0, unplug_for: float = 1.0) -> None:
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
        self.device = device
        self.exposure = exposure
        self._program = iter(program)
        self.pace = pace
        self.faults = frozenset(faults)
        self._rng = random.Random(seed)
        self.heartbeat = heartbeat
        self.resend_window = resend_window
        self.resend_fallback = resend_fallback
        self.resend_after = resend_after
        self.max_unacked = max_unacked
        self.start_on_host = start_on_host
        self.unplug_every = unplug_every
        self.unplug_for = unplug_for
        self.steps = 0
        """Program steps sent so far."""
        self.resent = 0
        """Frames resent (no acknowledgement in time, a status request, a replug)."""
        self.finished = asyncio.Event()
        """Set when the program has run out."""
        self.host_seen = asyncio.Event()
        """Set when the host first sent bytes or connected."""
        self._plugged = asyncio.Event()
        self._sent: deque[tuple[int, bytes]] = deque(maxlen=64)
        self._unacked: deque[tuple[int, bytes]] = deque()
        """Frames sent (or due while unplugged) that no acknowledgement covers yet, in order."""
        self._acks_read = 0
        self._acking = False
        """The host has acknowledged a frame: from then on unacknowledged frames are resent."""
        self._last_progress = 0.0
        self._room = asyncio.Event()
        self._room.set()
        self.ack_arrived = asyncio.Event()
        """Set whenever an acknowledgement arrives from the host (cleared by whoever waits on it)."""
        self._pending: list[bytes] = []
        self._resend_due = False
        self._quiet_since = 0.0
        self._lock = asyncio.Lock()
        self._impossible_done = False
        self._clients_seen = 0
        self._background: set[asyncio.Future[None]] = set()

    # -- control --------------------------------------------------------------------------------------

    def acked(self, seq: int) -> bool:
        """The frame numbered ``seq`` was sent and an acknowledgement covers it (cumulative ``$AK``)."""
        self._take_acks()
        return all(s != seq for s, _ in self._unacked) and any(s == seq for s, _ in self._sent)

    @property
    def unacked(self) -> int:
        """Frames sent that no acknowledgement covers yet (at most :attr:`max_unacked` before the device
        pauses: protocol §3)."""
        self._take_acks()
        return len(self._unacked)

    async def wait_room(self, frames: int) -> None:
        """Wait until ``frames`` more frames fit in the device's window of unacknowledged frames
        (:attr:`max_unacked`), as a device that keeps its frames for resending must before it sends
        more; returns at once while the host has never acknowledged (nothing is kept for it)."""
        while self._acking and self.unacked + frames > self.max_unacked and self.unacked:
            self.ack_arrived.clear()
            if self.unacked + frames <= self.max_unacked:
                return
            await self.ack_arrived.wait()

    async def power_cycle(self, session: str | None = None) -> None:
        """Restart the device (a power cut): a new session, numbering from 0, its unacknowledged frames
        lost; it sends its power-up identity frame at once."""
        async with self._lock:
            self._unacked.clear()
            self._room.set()
            self._acks_read = len(self.device.acked)
            data = self.device.restart(session)
            await self._send_locked(data)
            _log.info("sim.power_cycled", address=self.exposure.address, session=self.device.session)

    def _take_acks(self) -> None:
        """Drop the frames the host's new acknowledgements cover (an ``$AK n`` covers n and every frame
        sent before it)."""
        acks = self.device.acked
        while self._acks_read < len(acks):
            seq = acks[self._acks_read]
            self._acks_read += 1
            self._acking = True
            idx = next((i for i, (s, _) in enumerate(self._unacked) if s == seq), None)
            if idx is None:
                continue
            for _ in range(idx + 1):
                self._unacked.popleft()
            self._last_progress = asyncio.get_running_loop().time()
        if len(self._unacked) < self.max_unacked:
            self._room.set()

    async def unplug(self) -> None:
        """Unplug the device now (the program pauses where it is)."""
        async with self._lock:
            self._plugged.clear()
            await self.exposure.unplug()
            _log.info("sim.unplugged", address=self.exposure.address)

    async def replug(self) -> None:
        """Plug the device back in; missed frames are resent when the host shows up (or after
        ``resend_fallback`` seconds), and only then does the program carry on."""
        async with self._lock:
            await self.exposure.replug()
            # Dealing resumes only after the resend, so the host sees the frames in order.
            self._resend_due = True
            _log.info("sim.replugged", address=self.exposure.address)
        asyncio.get_running_loop().call_later(self.resend_fallback, self._fallback_resend)

    def _fallback_resend(self) -> None:
        if self._resend_due:
            task = asyncio.ensure_future(self._resend())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def run(self) -> None:
        """Start the exposure and run until the program ends (then keep answering and heartbeating
        until cancelled). Cancelling closes the exposure."""
        await self.exposure.start()
        self._plugged.set()
        loop = asyncio.get_running_loop()
        self._quiet_since = loop.time()
        tasks = [asyncio.create_task(self._answer_host()), asyncio.create_task(self._heartbeats()),
                 asyncio.create_task(self._resender())]
        if isinstance(self.exposure, TcpExposure):
            tasks.append(asyncio.create_task(self._watch_tcp(self.exposure)))
        if "unplug" in self.faults:
            tasks.append(asyncio.create_task(self._unplug_fault()))
        try:
            if self.start_on_host:
                await self.host_seen.wait()
            while True:
                await self._plugged.wait()
                await self._room.wait()
                # The model numbers a frame when the step is made, so making and writing it happen under
                # one lock: frames reach the wire in sequence order, whatever else is sent meanwhile.
                async with self._lock:
                    step = next(self._program, None)
                    if step is None:
                        break
                    data, pause = step
                    if data:
                        await self._send_locked(data)
                self.steps += 1
                await asyncio.sleep(self.pace * pause)
            self.finished.set()
            await asyncio.Event().wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.exposure.close()

    # -- sending ----------------------------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        """Send device frames (applying the configured faults); frames that could not be written
        because the device is unplugged are kept and sent after the replug."""
        async with self._lock:
            await self._send_locked(data)

    async def emit(self, make: Callable[[], bytes]) -> None:
        """Make frames with ``make()`` (a model method, e.g. ``shoe.draw``) and send them, both under the
        runner's lock, so frames reach the wire in sequence order even while heartbeats and status
        answers are being sent. Prefer this over building frames first and calling :meth:`send`."""
        async with self._lock:
            data = make()
            if data:
                await self._send_locked(data)

    async def _send_locked(self, data: bytes) -> None:
        frames = fx.frames_of(data)
        loop = asyncio.get_running_loop()
        if not self._unacked:
            self._last_progress = loop.time()
        for f in frames:
            self._sent.append((self._seq_of(f), f))
            self._unacked.append((self._seq_of(f), f))
        if not self._acking:  # a host that never acknowledges (one that only listens): nothing to resend
            while len(self._unacked) > self.max_unacked:
                self._unacked.popleft()
        elif len(self._unacked) >= self.max_unacked:
            self._room.clear()
        if not self._plugged.is_set():
            self._pending.extend(frames)
            return
        wire = self._apply_faults(data)
        ok = await self._write(wire)
        if not ok and not self.exposure.plugged:
            self._pending.extend(frames)
        self._quiet_since = asyncio.get_running_loop().time()

    async def _write(self, wire: bytes) -> bool:
        if "split" in self.faults:
            ok = True
            for piece in fx.split_random(wire, self._rng, max_chunk=7):
                ok = await self.exposure.write(piece) and ok
                await asyncio.sleep(0.002)
            return ok
        return await self.exposure.write(wire)

    def _apply_faults(self, data: bytes) -> bytes:
        frames = fx.frames_of(data)
        out: list[bytes] = []
        for f in frames:
            if "unreadable" in self.faults and f.startswith(b"$CD,") and self._rng.random() < 0.1:
                f = fx.unreadable(f)
            if "bad-checksum" in self.faults and self._rng.random() < 0.2:
                out.append(fx.corrupt_checksum(f))
            out.append(f)
        wire = b"".join(out)
        if ("impossible-card" in self.faults and not self._impossible_done
                and isinstance(self.device, VirtualShoe) and b"$CD," in data):
            self._impossible_done = True
            wire += fx.impossible_card(self.device)
        if "repeat" in self.faults:
            wire = fx.repeat_frames(wire, self._rng)
        if "garbage" in self.faults:
            wire = fx.insert_garbage(wire, self._rng, probability=0.3)
        if "wrong-baud" in self.faults:
            wire = fx.wrong_baud(wire, sent_baud=9600, read_baud=19200)
        return wire

    @staticmethod
    def _seq_of(f: bytes) -> int:
        try:
            return int(f.split(b",", 2)[1].split(b"*", 1)[0])
        except (IndexError, ValueError):
            return -1

    async def _resend(self) -> None:
        """After a replug: the frames the host may have missed, then anything dealt while unplugged."""
        async with self._lock:
            if not self._resend_due or not self.exposure.plugged:
                return
            self._resend_due = False
            self._take_acks()
            pending, self._pending = self._pending, []
            pending_set = set(map(id, pending))
            if self._acking:
                again = [f for _, f in self._unacked if id(f) not in pending_set]
            else:
                history = [f for _, f in self._sent if id(f) not in pending_set]
                again = history[-self.resend_window:] if self.resend_window else []
            self.resent += len(again)
            wire = b"".join(again) + b"".join(pending)
            if wire:
                await self.exposure.write(wire)
            self._last_progress = asyncio.get_running_loop().time()
            self._plugged.set()
            _log.info("sim.resent", frames=len(again), pending=len(pending))

    async def _resend_unacked(self, why: str) -> None:
        """Resend every frame no acknowledgement covers, unchanged (call under the lock)."""
        self._take_acks()
        if not self._acking or not self._unacked or not self._plugged.is_set():
            return
        frames = [f for _, f in self._unacked]
        self.resent += len(frames)
        await self._write(b"".join(frames))
        self._last_progress = asyncio.get_running_loop().time()
        _log.info("sim.resent", frames=len(frames), why=why)

    async def _resender(self) -> None:
        """Resend the unacknowledged frames when no acknowledgement came for ``resend_after`` s."""
        if self.resend_after is None:
            return
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(0.2, self.resend_after / 2))
            self._take_acks()
            if self._unacked and loop.time() - self._last_progress >= self.resend_after:
                async with self._lock:
                    if self._unacked and loop.time() - self._last_progress >= self.resend_after:
                        await self._resend_unacked("no acknowledgement")

    # -- background tasks -------------------------------------------------------------------------------

    async def _answer_host(self) -> None:
        while True:
            data = await self.exposure.from_host.get()
            self.host_seen.set()
            if self._resend_due:
                await self._resend()
            async with self._lock:
                answer = self.device.answer(data)  # numbers the status answer's frames, if any
                self._take_acks()
                self.ack_arrived.set()
                if answer:  # a status request: the host (re)connected; what it has not had first
                    await self._resend_unacked("status request")
                    await self._send_locked(answer)

    async def _watch_tcp(self, exposure: TcpExposure) -> None:
        while True:
            await exposure.wait_connected()
            if exposure.clients != self._clients_seen:
                self._clients_seen = exposure.clients
                self.host_seen.set()
                if self._resend_due:
                    await self._resend()
            await asyncio.sleep(0.05)

    async def _heartbeats(self) -> None:
        if self.heartbeat is None:
            return
        loop = asyncio.get_running_loop()
        while True:
            wait = self._quiet_since + self.heartbeat - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self._plugged.is_set() and (not self._acking or len(self._unacked) < self.max_unacked):
                await self.emit(self.device.heartbeat)
            else:
                self._quiet_since = loop.time()

    async def _unplug_fault(self) -> None:
        while True:
            await asyncio.sleep(self.unplug_every)
            await self.unplug()
            await asyncio.sleep(self.unplug_for)
            with contextlib.suppress(OSError):
                await self.replug()
