"""systemd service notification (``sd_notify``) without libsystemd.

Protocol: one datagram with ``KEY=VALUE`` lines sent to the ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET``
(a leading ``@`` means the abstract namespace). Source: sd_notify(3),
https://www.freedesktop.org/software/systemd/man/latest/sd_notify.html ; watchdog interval from
``$WATCHDOG_USEC`` per sd_watchdog_enabled(3). No I/O happens when ``$NOTIFY_SOCKET`` is unset.
"""

from __future__ import annotations

import os
import socket

__all__ = ["notify", "watchdog_interval"]


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``, ``"WATCHDOG=1"``, ``"STOPPING=1"``) to systemd.

    Returns ``True`` when a datagram was sent, ``False`` when not running under systemd notify or the
    socket could not be reached (an unreachable socket is not worth crashing a table daemon for).
    """
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr[0] == "@":
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(addr)
            sock.sendall(state.encode())
    except OSError:
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half of ``$WATCHDOG_USEC``), or ``None`` when disabled.

    Disabled when ``$WATCHDOG_USEC`` is unset or invalid, or ``$WATCHDOG_PID`` names another process.
    """
    pid = os.environ.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2_000_000 if usec > 0 else None
