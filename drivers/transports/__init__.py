"""Transports: serial paths, pyserial URLs (socket://, rfc2217://) and USB.

:func:`open_transport` picks the transport from the URL form:

==========================================  ======================================================
``/dev/ttyUSB0``, ``/dev/serial/by-id/…``,  pyserial + pyserial-asyncio-fast (:mod:`.serial`),
a pty path or udev symlink                  exclusive flock
``socket://host:port``                      pyserial-asyncio-fast over ``loop.create_connection``
``rfc2217://host:port`` (and other          pyserial's URL handler read by a thread (:mod:`.threaded`)
pyserial URL handlers)
``usb://VID:PID[?serial=…&interface=N…]``   pyusb, reads in a worker thread (:mod:`.usb`)
==========================================  ======================================================
"""

from __future__ import annotations

from typing import Any

from tablesense.drivers.transports.base import ByteTransport, LinkLost, OpenError

__all__ = ["ByteTransport", "LinkLost", "OpenError", "open_transport"]


async def open_transport(url: str, *, baud: int = 9600, usb_backend: Any = None,
                         open_timeout: float = 10.0) -> ByteTransport:
    """Open the device named by ``url`` (forms in the module docstring) and return its byte pipe.

    ``baud`` is the serial line speed in bit/s; ``usb_backend`` an optional ``usb.backend.IBackend``
    for ``usb://`` URLs. Raises :class:`OpenError` with one short human cause.
    """
    if url.startswith("usb://"):
        from tablesense.drivers.transports.usb import open_usb
        return await open_usb(url, backend=usb_backend)
    if "://" in url and not url.startswith("socket://"):
        from tablesense.drivers.transports.threaded import open_threaded
        return await open_threaded(url, baud=baud, open_timeout=open_timeout)
    from tablesense.drivers.transports.serial import open_serial
    return await open_serial(url, baud=baud, open_timeout=open_timeout)
