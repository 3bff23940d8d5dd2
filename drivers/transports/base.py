"""What every transport gives the device link: a byte pipe that can be read, written and closed.

A transport knows nothing about frames (one module, one job): it moves bytes between a device and the
:class:`drivers.link.DeviceLink`, which owns the codec, the reconnect loop and the link state.

Errors are reduced to two exceptions so that the link never has to know which library raised what:

* :class:`OpenError` -- the device could not be opened; ``cause`` is one short human phrase
  ("no such device", "permission denied", "busy: locked by another process", ...) so that the link can
  log one clear line naming the device and the cause (docs/devices.md).
* :class:`LinkLost` -- an open link went away (unplug, far end closed, I/O error).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import threading
from collections.abc import Callable
from typing import Protocol

__all__ = ["ByteTransport", "LinkLost", "OpenError", "ReaderThreadLink", "describe_os_error"]


class OpenError(Exception):
    """The device at ``url`` could not be opened because of ``cause`` (a short human phrase).

    ``kind`` is a stable machine word: ``not_found``, ``permission``, ``busy``, ``refused``, ``timeout``,
    ``not_a_tty``, ``bad_url`` or ``other``. ``bad_url`` means retrying cannot help (the link still
    retries, slowly, because a config reload may fix it, but the log says so).
    """

    def __init__(self, url: str, cause: str, kind: str = "other") -> None:
        super().__init__(f"cannot open {url}: {cause}")
        self.url = url
        self.cause = cause
        self.kind = kind


class LinkLost(Exception):
    """An open transport stopped working; ``cause`` is a short human phrase (e.g. "device disconnected")."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class ReaderThreadLink:
    """Base of transports read by one dedicated blocking thread (pyserial URLs without a file
    descriptor, pyusb): the thread hands byte chunks, or the :class:`LinkLost` that ended it, to the
    event loop through a queue; :meth:`read` is cancel-safe and nothing is abandoned mid-read.

    Must be constructed on the running event loop. Subclasses implement ``_reader`` (the thread's
    loop, stopping when ``_stop`` is set and calling ``_post``) and call :meth:`_start_reader`.
    """

    def __init__(self, description: str) -> None:
        self.description = description
        self._loop = asyncio.get_running_loop()
        self._chunks: asyncio.Queue[bytes | LinkLost] = asyncio.Queue()
        self._stop = threading.Event()
        self._lost: LinkLost | None = None
        self._thread: threading.Thread | None = None

    def _start_reader(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def _join_reader(self, timeout: float) -> None:
        """Wait (blocking, at most ``timeout`` seconds) for the reader thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _post(self, item: bytes | LinkLost) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
            self._loop.call_soon_threadsafe(self._chunks.put_nowait, item)

    async def read(self) -> bytes:
        """Next chunk of received bytes; raises :class:`LinkLost` once the device is gone. Cancel-safe."""
        if self._lost is not None:
            raise self._lost
        item = await self._chunks.get()
        if isinstance(item, LinkLost):
            self._lost = item
            raise item
        return item


class ByteTransport(Protocol):
    """An open, frame-agnostic byte pipe to one device.

    ``read`` returns the next non-empty chunk of bytes as the OS delivered it (frames may be split across
    chunks or several frames may share one); it raises :class:`LinkLost` once the link is gone and is safe
    to cancel (no bytes are lost by cancelling a pending read). ``write`` sends host-to-device bytes
    (status request, acknowledge) and raises :class:`LinkLost` if the link is known to be gone. ``close``
    releases the device (port lock, USB interface, kernel driver re-attached) and is idempotent.
    """

    description: str
    """Human description for logs, e.g. ``serial /dev/ttyUSB0 @ 9600``."""

    async def read(self) -> bytes: ...

    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


_ERRNO_CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOENT: ("no such device", "not_found"),
    errno.ENODEV: ("no such device", "not_found"),
    errno.ENXIO: ("no such device or address (unplugged?)", "not_found"),
    errno.EACCES: ("permission denied (is the service user in the device's group, e.g. dialout?)",
                   "permission"),
    errno.EPERM: ("permission denied (is the service user in the device's group, e.g. dialout?)",
                  "permission"),
    errno.EBUSY: ("busy: in use by another process", "busy"),
    errno.EAGAIN: ("busy: locked by another process", "busy"),
    errno.ENOTTY: ("not a serial port", "not_a_tty"),
    errno.ECONNREFUSED: ("connection refused (device server down or wrong port?)", "refused"),
    errno.EHOSTUNREACH: ("host unreachable", "refused"),
    errno.ENETUNREACH: ("network unreachable", "refused"),
    errno.ETIMEDOUT: ("timed out", "timeout"),
    errno.EIO: ("I/O error (device disconnected?)", "other"),
}


def describe_os_error(err: int | None, fallback: str) -> tuple[str, str]:
    """Map an ``errno`` value to ``(cause, kind)`` for :class:`OpenError`; ``fallback`` when unknown."""
    if err is not None and err in _ERRNO_CAUSES:
        return _ERRNO_CAUSES[err]
    return fallback, "other"
