"""Serial device paths and ``socket://`` URLs through pyserial + pyserial-asyncio-fast.

* Device paths (``/dev/ttyUSB0``, ``/dev/serial/by-id/...``, a udev symlink, a pseudo-terminal) are
  opened by pyserial in an executor thread (pyserial-asyncio-fast ``create_serial_connection``; never
  the blocking open on the event loop -- it can block for seconds on a USB adapter) with
  ``exclusive=True`` (flock), so
  a second reader fails fast with "busy" instead of both receiving half the bytes (pyserial ``exclusive``).
* ``socket://host:port`` (a serial device server in raw TCP mode): pyserial-asyncio-fast special-cases it
  and uses ``loop.create_connection``. The socket gets TCP keepalive (:func:`_tcp_keepalive`: probes
  after :data:`KEEPALIVE_IDLE` s idle, every :data:`KEEPALIVE_INTERVAL` s, :data:`KEEPALIVE_PROBES`
  unanswered = dead) and a ``TCP_USER_TIMEOUT`` of :data:`USER_TIMEOUT` s for data sent but never
  acknowledged, so a peer that vanished without FIN or RST ends the connection (``LinkLost``) instead of
  leaving it half-open forever. A path that still carries TCP but no device bytes (a proxy or device
  server that lost the serial side) is caught above, by the link's ``stale_reconnect``
  (docs/devices.md).

How an unplug shows up: pyserial raises ``SerialException`` ("device reports
readiness to read but returned no data" or "read failed: [Errno 5]"); pyserial-asyncio-fast closes the
port and calls ``connection_lost(exc)``; a TCP peer closing gives ``connection_lost(None)``. Both become
:class:`~drivers.transports.base.LinkLost` on the next :meth:`SerialLink.read`.

An unplug found by a *write* (the host acknowledges a frame just as the device goes: ``write failed:
[Errno 5]``) is the same loss: pyserial-asyncio-fast would report it to the event loop's exception
handler (asyncio logs "Fatal write error on serial transport" with a traceback) before aborting. The
transport's fatal-error report is replaced (:func:`_quiet_fatal_errors`) so the failure only aborts the
port: :meth:`SerialLink.write` raises :class:`LinkLost` at once, the pending read gets it too, and the
device link logs the loss once (``link.lost``) and reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import urllib.parse

import serial
import serial_asyncio_fast

from tablesense.drivers.transports.base import LinkLost, OpenError, describe_os_error
from tablesense.drivers.waits import wait_at_most

__all__ = ["KEEPALIVE_IDLE", "KEEPALIVE_INTERVAL", "KEEPALIVE_PROBES", "USER_TIMEOUT", "SerialLink",
           "open_serial"]

_CLOSE_TIMEOUT = 5.0

KEEPALIVE_IDLE = 10
"""Seconds a ``socket://`` connection may be idle before the first TCP keepalive probe."""
KEEPALIVE_INTERVAL = 5
"""Seconds between TCP keepalive probes."""
KEEPALIVE_PROBES = 3
"""Unanswered keepalive probes after which the kernel drops the connection (about 25 s in all)."""
USER_TIMEOUT = 25
"""Seconds sent data may stay unacknowledged before the kernel drops the connection (``TCP_USER_TIMEOUT``,
RFC 5482; keepalive probes are not sent while data is outstanding)."""


def _tcp_keepalive(transport: asyncio.BaseTransport) -> None:
    """Turn on TCP keepalive and the user timeout (see the module docstring) on the socket of a
    ``socket://`` transport. Options the platform lacks are skipped; an ``OSError`` from one is ignored
    (the link's ``stale_reconnect`` still reopens a silent connection)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                        ("TCP_KEEPCNT", KEEPALIVE_PROBES), ("TCP_USER_TIMEOUT", USER_TIMEOUT * 1000)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        with contextlib.suppress(OSError):
            sock.setsockopt(level, option, value)


class _Pipe(asyncio.Protocol):
    """asyncio protocol that queues received chunks and the loss of the connection, in order;
    ``failed`` holds the error that aborted the transport (a failed write), if any."""

    def __init__(self) -> None:
        self.chunks: asyncio.Queue[bytes | LinkLost] = asyncio.Queue()
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.failed: BaseException | None = None

    def data_received(self, data: bytes) -> None:
        if data:
            self.chunks.put_nowait(bytes(data))

    def eof_received(self) -> bool:
        return False  # close our side too: a TCP device server hung up

    def connection_lost(self, exc: Exception | None) -> None:
        cause = _lost_cause(exc)
        self.chunks.put_nowait(LinkLost(cause))
        if not self.lost.done():
            self.lost.set_result(None)


def _lost_cause(exc: BaseException | None) -> str:
    if exc is None:
        return "connection closed by the far end"
    text = str(exc)
    if text.startswith("write failed") and "[Errno 5]" in text:
        return "device disconnected (write failed: I/O error)"
    if "readiness to read but returned no data" in text or "[Errno 5]" in text:
        return "device disconnected (read returned no data / I/O error)"
    return text or type(exc).__name__


def _quiet_fatal_errors(transport: asyncio.BaseTransport, pipe: _Pipe) -> None:
    """Make a fatal transport error (a failed write) abort the port without the event loop's exception
    handler: the error is kept in ``pipe.failed`` and reaches the link as :class:`LinkLost` (see the
    module docstring). Only for pyserial-asyncio-fast's ``SerialTransport``, whose ``_fatal_error`` calls
    ``loop.call_exception_handler`` and then ``_abort(exc)``; a transport without those methods (another
    library version) keeps its own reporting."""
    abort = getattr(transport, "_abort", None)
    if not isinstance(transport, serial_asyncio_fast.SerialTransport) or not callable(abort) \
            or not callable(getattr(transport, "_fatal_error", None)):
        return

    def fatal_error(exc: BaseException, message: str = "") -> None:
        pipe.failed = exc
        abort(exc)

    transport._fatal_error = fatal_error  # type: ignore[method-assign]


class SerialLink:
    """An open serial port or ``socket://`` connection (see module docstring). Made by :func:`open_serial`."""

    def __init__(self, transport: asyncio.BaseTransport, pipe: _Pipe, description: str) -> None:
        self._transport = transport
        self._pipe = pipe
        self.description = description
        self._lost: LinkLost | None = None

    async def read(self) -> bytes:
        """Next chunk of received bytes; raises :class:`LinkLost` once the port is gone. Cancel-safe."""
        if self._lost is not None:
            raise self._lost
        item = await self._pipe.chunks.get()
        if isinstance(item, LinkLost):
            self._lost = item
            raise item
        return item

    async def write(self, data: bytes) -> None:
        """Queue host-to-device bytes. Raises :class:`LinkLost` if the port is closing (writes would be
        silently dropped by the transport -- asyncio ``Transport.write`` after close)."""
        if self._lost is not None or self._transport.is_closing():
            raise LinkLost(self._lost.cause if self._lost else self._closing_cause())
        assert isinstance(self._transport, asyncio.WriteTransport)
        self._transport.write(data)
        if self._pipe.failed is not None:  # the write found the device gone: the port is aborting
            raise LinkLost(self._closing_cause())

    def _closing_cause(self) -> str:
        return _lost_cause(self._pipe.failed) if self._pipe.failed is not None else "port is closing"

    async def close(self) -> None:
        """Close the port and wait until pyserial has released it (so the flock is gone before a reopen)."""
        if not self._transport.is_closing():
            self._transport.close()
        with contextlib.suppress(TimeoutError):
            await wait_at_most(asyncio.shield(self._pipe.lost), _CLOSE_TIMEOUT)


def _open_error(url: str, exc: BaseException) -> OpenError:
    err = getattr(exc, "errno", None)
    text = str(exc)
    if err is None:
        # pyserial wraps some failures without errno ("Could not configure port: (25, ...)").
        m = re.search(r"\((\d+),", text) or re.search(r"\[Errno (\d+)\]", text)
        err = int(m.group(1)) if m else None
    if "Could not exclusively lock" in text:
        return OpenError(url, "busy: locked by another process (another tablesense or a terminal?)", "busy")
    cause, kind = describe_os_error(err, text or type(exc).__name__)
    return OpenError(url, cause, kind)


async def open_serial(url: str, *, baud: int = 9600, open_timeout: float = 10.0) -> SerialLink:
    """Open a device path or ``socket://host:port`` and return a :class:`SerialLink`.

    ``baud`` is the line speed in bits per second (ignored by ``socket://``; the device server's own
    setting applies). Raises :class:`OpenError` with a short cause ("no such device", "permission denied",
    "busy: locked by another process", "connection refused", "timed out", ...).
    """
    loop = asyncio.get_running_loop()
    parsed = urllib.parse.urlparse(url)
    is_socket = parsed.scheme == "socket"
    if is_socket:
        if not parsed.hostname or parsed.port is None:
            raise OpenError(url, "socket:// URL needs host:port", "bad_url")
        description = f"tcp {parsed.hostname}:{parsed.port}"
    else:
        description = f"serial {url} @ {baud}"
    kwargs: dict[str, object] = {"baudrate": baud}
    if not is_socket:
        kwargs["exclusive"] = True
    pipe: _Pipe | None = None

    def factory() -> _Pipe:
        nonlocal pipe
        pipe = _Pipe()
        return pipe

    try:
        async with asyncio.timeout(open_timeout):
            transport, _ = await serial_asyncio_fast.create_serial_connection(loop, factory, url, **kwargs)
    except TimeoutError as exc:
        raise OpenError(url, f"timed out after {open_timeout:g} s", "timeout") from exc
    except (OSError, serial.SerialException) as exc:
        raise _open_error(url, exc) from exc
    except ValueError as exc:  # bad baud rate or URL options
        raise OpenError(url, str(exc), "bad_url") from exc
    assert pipe is not None
    if is_socket:
        _tcp_keepalive(transport)
    _quiet_fatal_errors(transport, pipe)
    return SerialLink(transport, pipe, description)
