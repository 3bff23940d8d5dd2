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

import importlib.util
import re
import urllib.parse
from typing import Any

from tablesense.drivers.transports.base import ByteTransport, LinkLost, OpenError

__all__ = ["ByteTransport", "LinkLost", "OpenError", "open_transport", "url_problem"]

_SCHEME = re.compile(r"[a-z][a-z0-9]*")


def url_problem(url: str) -> str | None:
    """Why ``url`` can never be opened, whatever is plugged in, else ``None``: a control character, a
    scheme pyserial has no handler for, a ``socket://``/``rfc2217://`` URL without a host or with a port
    outside 1-65535, a ``usb://`` URL :func:`.usb.parse_usb_url` refuses. Pure: nothing is opened, so
    the config check can call it (whether a device path exists is the start-up's business)."""
    bad = next((c for c in url if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        return f"holds the control character U+{ord(bad):04X}"
    if "://" not in url:
        return None
    scheme = url.split("://", 1)[0]
    if scheme == "usb":
        from tablesense.drivers.transports.usb import parse_usb_url
        try:
            parse_usb_url(url)
        except OpenError as exc:
            return exc.cause
        return None
    if (not _SCHEME.fullmatch(scheme)
            or importlib.util.find_spec(f"serial.urlhandler.protocol_{scheme}") is None):
        return (f"{scheme!r} is not a device URL scheme (a device path, socket://HOST:PORT, "
                "rfc2217://HOST:PORT, usb://VID:PID or another pyserial URL handler)")
    if scheme in ("socket", "rfc2217"):
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or not 1 <= port <= 65535:
            return f"expected {scheme}://HOST:PORT with a port from 1 to 65535"
    return None


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
