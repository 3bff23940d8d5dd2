"""Small network address helpers shared by the config checks and the metrics listener."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ``::1``; brackets allowed)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
