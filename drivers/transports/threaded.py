"""pyserial URL handlers that have no file descriptor (``rfc2217://``, ``loop://``, ...), read in a thread.

pyserial-asyncio-fast drives a port from the event loop with ``add_reader(serial.fileno())``; it special
cases ``socket://`` but the ``rfc2217://`` handler has no ``fileno()`` and refuses ``write_timeout=0``
("write_timeout is currently not supported"), so it cannot be used there
(home-assistant-libs/pyserial-asyncio-fast#18, pyserial/pyserial-asyncio#46, both open). pyserial's own
RFC 2217 client is well kept and works fine synchronously, so this transport opens it with
``serial.serial_for_url`` in a worker thread and runs one continuous blocking read loop in a dedicated
thread (short read timeout, nothing is abandoned mid-read, so no bytes are lost), handing chunks to the
event loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib

import serial

from tablesense.drivers.transports.base import LinkLost, OpenError, ReaderThreadLink, describe_os_error

__all__ = ["ThreadedSerialLink", "open_threaded"]

_READ_TIMEOUT = 0.1


class ThreadedSerialLink(ReaderThreadLink):
    """An open pyserial URL port read by a dedicated thread. Made by :func:`open_threaded`."""

    def __init__(self, port: serial.SerialBase, description: str) -> None:
        super().__init__(description)
        self._port = port
        self._start_reader(self._reader, f"tablesense-read {description}")

    def _reader(self) -> None:
        while not self._stop.is_set():
            try:
                waiting = self._port.in_waiting
                data = self._port.read(waiting or 1)
            except Exception as exc:  # any pyserial/socket failure ends the link
                if not self._stop.is_set():
                    self._post(LinkLost(str(exc) or type(exc).__name__))
                return
            if data:
                self._post(bytes(data))

    async def write(self, data: bytes) -> None:
        """Write host-to-device bytes from a worker thread; raises :class:`LinkLost` on failure."""
        if self._lost is not None:
            raise self._lost
        try:
            await asyncio.to_thread(self._port.write, data)
        except Exception as exc:
            raise LinkLost(str(exc) or type(exc).__name__) from exc

    async def close(self) -> None:
        """Stop the reader thread (it notices within one read timeout) and close the port."""
        self._stop.set()
        await asyncio.to_thread(self._join_reader, 2.0)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._port.close)


async def open_threaded(url: str, *, baud: int = 9600, open_timeout: float = 10.0) -> ThreadedSerialLink:
    """Open a pyserial URL (e.g. ``rfc2217://host:port``) off the event loop.

    ``baud`` is passed to the remote port (RFC 2217 sets it on the device server). Raises
    :class:`OpenError` with a short cause.
    """
    def _open() -> serial.SerialBase:
        return serial.serial_for_url(url, baudrate=baud, timeout=_READ_TIMEOUT)

    try:
        async with asyncio.timeout(open_timeout):
            port = await asyncio.to_thread(_open)
    except TimeoutError as exc:
        raise OpenError(url, f"timed out after {open_timeout:g} s", "timeout") from exc
    except ValueError as exc:
        raise OpenError(url, str(exc), "bad_url") from exc
    except (OSError, serial.SerialException) as exc:
        cause, kind = describe_os_error(getattr(exc, "errno", None), str(exc) or type(exc).__name__)
        if "refused" in str(exc).lower():
            cause, kind = "connection refused (device server down or wrong port?)", "refused"
        raise OpenError(url, cause, kind) from exc
    scheme = url.split("://", 1)[0]
    return ThreadedSerialLink(port, f"{scheme} {url.split('://', 1)[1]} @ {baud}")
