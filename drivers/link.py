"""DeviceLink: one device (shoe or bet pads) kept connected, decoded and watched, forever.

A :class:`DeviceLink` owns the transport for one device URL (:func:`drivers.transports.open_transport`)
and one codec instance (:func:`drivers.protocols.get_codec`). It puts decoded events and link-state
changes on the daemon's queue and never exits because a device went away (docs/devices.md):

* **States** (:class:`drivers.events.LinkState`): ``CONNECTING`` when started; ``ONLINE`` once the port is
  open; ``STALE`` when open but no valid frame arrived for ``stale_after`` seconds (devices send
  heartbeats, so silence means trouble; a status request is sent once); back to ``ONLINE`` on the next
  frame; ``DISCONNECTED`` (with the cause as ``detail``) when an open fails or the link is lost. A
  :class:`~drivers.events.DeviceState` is queued only when state or detail changes, so a device that
  stays unplugged produces one state message, not one per retry.
* **Reconnect**: the one reconnect backoff of tablesense, :class:`drivers.backoff.Backoff` (also used by
  the MQTT relay and the signage feed): after the n-th consecutive failure a delay drawn uniformly from
  ``[0, min(backoff_max, backoff_initial * 2 ** (n - 1))]`` seconds ("full jitter"), so that many
  tables restarting together do not retry in lock step and a device that comes back after a long
  outage is opened again within ``backoff_max`` seconds; the backoff restarts from the beginning once a
  connection has delivered a valid frame.
* **Logging** (structlog, event names ``link.*``): the loss of a link is logged once (``link.lost``,
  warning) and an open error once per distinct cause (``link.open_failed``: the device name, URL and
  cause, e.g. "permission denied"); repeats go to debug. ``link.online`` says when the link is back and
  after how many attempts. ``link.no_valid_frames`` warns when bytes arrive but no frame decodes (wrong
  baud rate or wrong protocol). Sequence gaps reported by the codec are logged (``link.sequence_gap``)
  and passed to ``on_gap``.
* **Reconnect and the codec**: the codec is ``reset()`` on each new connection (a partial frame from
  the old connection must not be glued to the new one) but keeps its sequence memory, so frames a device
  resends after a replug are dropped as duplicates and a real loss shows up as a gap.
* **Duplicates re-acknowledged** (docs/protocol.md §3): when the codec drops a duplicate, the link sends
  ``AK`` again for the last sequence number the host acknowledged (:meth:`DeviceLink.ack`, or the
  auto-ack), because the earlier ``AK`` was probably lost. Never for a number not yet acknowledged: a
  daemon that acknowledges only after journaling keeps that order (nothing is re-sent before the
  first acknowledgement).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import Any

import structlog

from tablesense.drivers.backoff import Backoff
from tablesense.drivers.events import DeviceEvent, DeviceState, LinkState
from tablesense.drivers.protocols.base import Codec, CodecStats, SequenceGap, get_codec
from tablesense.drivers.transports import ByteTransport, LinkLost, OpenError, open_transport
from tablesense.drivers.waits import wait_at_most

__all__ = ["DeviceLink"]

_log = structlog.get_logger()

_NO_FRAMES_WARN_BYTES = 256
"""Bytes received on one connection without a single valid frame before ``link.no_valid_frames``."""


class DeviceLink:
    """Keep one device connected and decoded; see the module docstring for states, backoff and logs.

    Args:
        name: the device name from the table config (put into every event and state message).
        url: device path (``/dev/serial/by-id/...``, a pty), ``socket://host:port``,
            ``rfc2217://host:port`` or ``usb://VID:PID[?...]`` (:mod:`drivers.transports`).
        protocol: codec name registered in the ``tablesense.protocols`` entry point group (``"tsref"``).
        baud: serial line speed in bit/s.
        queue: where decoded :data:`~drivers.events.DeviceEvent` and :class:`~drivers.events.DeviceState`
            items go, in arrival order (``await queue.put``: a full queue slows reading, nothing is dropped).
        stale_after: seconds without a valid frame before the link is ``STALE``.
        stale_reconnect: seconds spent ``STALE`` before the connection is closed and reopened (useful for
            ``socket://``, where a half-open TCP connection never errors); ``None`` = never.
        backoff_initial, backoff_max: reconnect delay bounds in seconds (:class:`drivers.backoff.Backoff`:
            the first failure's ceiling, and the largest delay ever waited).
        auto_ack: send the codec's acknowledge for every decoded event (a daemon that journals events
            should leave this off and call :meth:`ack` after the event is durable).
        status_on_connect: send a status request right after each open, so the device announces its
            identity and state (and a device that resends after a replug knows the host is back).
        usb_backend: a ``usb.backend.IBackend`` for ``usb://`` URLs (tests, the simulator).
        on_gap: called with each :class:`~drivers.protocols.base.SequenceGap` the codec reports.
        rng: random source for the jitter (tests pass a seeded one).

    Raises:
        ValueError: unless ``stale_after > 0`` and ``0 < backoff_initial <= backoff_max``.
        drivers.protocols.base.UnknownProtocol: ``protocol`` is not registered (at construction, so a
            config error is reported before anything runs).
    """

    def __init__(self, name: str, url: str, protocol: str, *, baud: int = 9600,
                 queue: asyncio.Queue[DeviceEvent | DeviceState], stale_after: float = 5.0,
                 stale_reconnect: float | None = None, backoff_initial: float = 0.2,
                 backoff_max: float = 5.0, auto_ack: bool = False, status_on_connect: bool = True,
                 usb_backend: Any = None,
                 on_gap: Callable[[SequenceGap], None] | None = None,
                 rng: random.Random | None = None) -> None:
        if stale_after <= 0 or backoff_initial <= 0 or backoff_max < backoff_initial:
            raise ValueError("need stale_after > 0 and 0 < backoff_initial <= backoff_max")
        self.name = name
        self.url = url
        self.baud = baud
        self._queue = queue
        self._codec: Codec = get_codec(protocol)(name)
        self._stale_after = stale_after
        self._stale_reconnect = stale_reconnect
        self._backoff = Backoff(backoff_initial, backoff_max, rng=rng or random.Random())
        self._auto_ack = auto_ack
        self._status_on_connect = status_on_connect
        self._usb_backend = usb_backend
        self._on_gap = on_gap
        self._state = LinkState.CONNECTING
        self._detail = ""
        self._transport: ByteTransport | None = None
        self.connects = 0
        """Successful opens since construction."""
        self.open_failures = 0
        """Failed opens since construction."""
        self.dropped_sends = 0
        """Host-to-device frames dropped because the link was down."""
        self.reacks = 0
        """``AK`` frames re-sent because a duplicate arrived (protocol §3)."""
        self._last_acked: int | None = None

    # -- public API -----------------------------------------------------------------------------------

    @property
    def state(self) -> LinkState:
        """The current link state."""
        return self._state

    @property
    def detail(self) -> str:
        """Human detail of the current state (the transport description, or the cause of a failure)."""
        return self._detail

    @property
    def stats(self) -> CodecStats:
        """The codec's counters (frames, bad checksums, garbage bytes, duplicates, gaps, ...)."""
        return self._codec.stats

    async def send(self, data: bytes) -> None:
        """Send host-to-device bytes (e.g. a status request or an acknowledge).

        While the link is down the bytes are dropped (counted in :attr:`dropped_sends`, logged at
        debug): the device resends unacknowledged frames after a reconnect. Never raises for a lost link.
        """
        transport = self._transport
        if transport is None:
            self.dropped_sends += 1
            _log.debug("link.send_dropped", device=self.name, url=self.url, size=len(data))
            return
        try:
            await transport.write(data)
        except LinkLost as exc:
            self.dropped_sends += 1
            _log.debug("link.send_dropped", device=self.name, url=self.url, size=len(data), cause=exc.cause)

    async def ack(self, seq: int) -> None:
        """Acknowledge the device frame numbered ``seq`` (the codec's ack frame via :meth:`send`); it is
        the number re-acknowledged when a duplicate arrives later."""
        self._last_acked = seq
        await self.send(self._codec.ack(seq))

    async def request_status(self) -> None:
        """Ask the device to report its identity and state (the codec's status request via :meth:`send`)."""
        await self.send(self._codec.status_request())

    async def run(self) -> None:
        """Connect, decode and reconnect until cancelled. Never returns or raises because of the device.

        Cancelling closes the open port (releasing the lock / USB interface) and queues a final
        ``DISCONNECTED`` state ("stopped") if the queue has room.
        """
        backoff = self._backoff
        backoff.reset()
        outage_started_by_loss = False
        last_logged_cause: str | None = None
        await self._set_state(LinkState.CONNECTING, f"opening {self.url}")
        try:
            while True:
                try:
                    transport = await open_transport(self.url, baud=self.baud, usb_backend=self._usb_backend)
                except OpenError as exc:
                    self.open_failures += 1
                    if exc.cause != last_logged_cause:
                        quiet = outage_started_by_loss and exc.kind in ("not_found", "refused", "timeout")
                        (_log.info if quiet else _log.warning)(
                            "link.open_failed", device=self.name, url=self.url, cause=exc.cause,
                            kind=exc.kind, message=f"{self.name}: cannot open {self.url}: {exc.cause}; "
                                                   "retrying with backoff")
                        last_logged_cause = exc.cause
                    else:
                        _log.debug("link.open_failed", device=self.name, url=self.url, cause=exc.cause,
                                   attempt=backoff.failures + 1)
                    await self._set_state(LinkState.DISCONNECTED, f"cannot open: {exc.cause}")
                    await asyncio.sleep(backoff.next_delay())
                    continue
                except Exception as exc:  # a library bug must not end the link either
                    self.open_failures += 1
                    _log.exception("link.open_error", device=self.name, url=self.url, error=repr(exc))
                    await self._set_state(LinkState.DISCONNECTED, f"cannot open: {exc!r}")
                    await asyncio.sleep(backoff.next_delay())
                    continue

                self.connects += 1
                self._codec.reset()
                self._transport = transport
                _log.info("link.online", device=self.name, url=self.url, transport=transport.description,
                          after_attempts=backoff.failures)
                await self._set_state(LinkState.ONLINE, transport.description)
                frames_before = self._codec.stats.frames
                try:
                    cause = await self._pump(transport)
                finally:
                    self._transport = None
                    with contextlib.suppress(Exception):
                        await wait_at_most(asyncio.shield(transport.close()), 5.0)
                if self._codec.stats.frames > frames_before:
                    backoff.reset()  # a connection that delivered a frame: start small again
                _log.warning("link.lost", device=self.name, url=self.url, cause=cause,
                             message=f"{self.name}: link to {self.url} lost: {cause}; reconnecting")
                outage_started_by_loss = True
                last_logged_cause = None
                await self._set_state(LinkState.DISCONNECTED, cause)
                await asyncio.sleep(backoff.next_delay())
        finally:
            self._transport = None
            if self._state is not LinkState.DISCONNECTED or self._detail != "stopped":
                self._state, self._detail = LinkState.DISCONNECTED, "stopped"
                with contextlib.suppress(asyncio.QueueFull):
                    self._queue.put_nowait(DeviceState(self.name, LinkState.DISCONNECTED, "stopped"))

    # -- internals ------------------------------------------------------------------------------------

    async def _set_state(self, state: LinkState, detail: str) -> None:
        if state is self._state and detail == self._detail:
            return
        self._state, self._detail = state, detail
        await self._queue.put(DeviceState(self.name, state, detail))

    async def _pump(self, transport: ByteTransport) -> str:
        """Read, decode and queue until the link is lost; return the cause."""
        loop = asyncio.get_running_loop()
        last_frame = loop.time()
        stale = False
        received = 0
        frames_at_open = self._codec.stats.frames
        warned_no_frames = False
        if self._status_on_connect:
            try:
                await transport.write(self._codec.status_request())
            except LinkLost as exc:
                return exc.cause
        while True:
            now = loop.time()
            if stale:
                timeout = (None if self._stale_reconnect is None
                           else last_frame + self._stale_after + self._stale_reconnect - now)
            else:
                timeout = last_frame + self._stale_after - now
            try:
                async with asyncio.timeout(None if timeout is None else max(timeout, 0.0)):
                    chunk = await transport.read()
            except TimeoutError:
                if not stale:
                    stale = True
                    silent = loop.time() - last_frame
                    _log.warning("link.stale", device=self.name, url=self.url, silent_s=round(silent, 3))
                    await self._set_state(LinkState.STALE, f"no valid frame for {silent:.1f} s")
                    try:
                        await transport.write(self._codec.status_request())
                    except LinkLost as exc:
                        return exc.cause
                    continue
                return f"no valid frame for {loop.time() - last_frame:.1f} s (stale); reopening"
            except LinkLost as exc:
                return exc.cause
            received += len(chunk)
            before = self._codec.stats  # a snapshot copy: one before and one after the chunk
            events = self._codec.feed(chunk)
            after = self._codec.stats
            for gap in self._codec.take_gaps():
                _log.warning("link.sequence_gap", device=self.name, expected=gap.expected, got=gap.got)
                if self._on_gap is not None:
                    self._on_gap(gap)
            if after.frames > before.frames:
                last_frame = loop.time()
                if stale:
                    stale = False
                    await self._set_state(LinkState.ONLINE, transport.description)
            elif (not warned_no_frames and received >= _NO_FRAMES_WARN_BYTES
                  and after.frames == frames_at_open):
                warned_no_frames = True
                _log.warning("link.no_valid_frames", device=self.name, url=self.url, bytes=received,
                             baud=self.baud, message=f"{self.name}: {received} bytes from {self.url} but no "
                             f"valid frame: wrong baud rate (configured {self.baud}) or wrong protocol?")
            if after.duplicates > before.duplicates and self._last_acked is not None:
                # A resent frame the host already has: our AK was probably lost (protocol §3).
                self.reacks += 1
                _log.debug("link.reack", device=self.name, seq=self._last_acked)
                try:
                    await transport.write(self._codec.ack(self._last_acked))
                except LinkLost as exc:
                    return exc.cause
            for event in events:
                await self._queue.put(event)
                if self._auto_ack:
                    self._last_acked = event.seq
                    try:
                        await transport.write(self._codec.ack(event.seq))
                    except LinkLost as exc:
                        return exc.cause
