"""Small network address helpers shared by the config checks, the metrics listener, the commands that take
``HOST:PORT`` and the web pages' listeners."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "parse_hostport", "parse_peer"]


def is_loopback(host: str) -> bool:
    """``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ``::1``; brackets allowed)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_hostport(text: str, default_port: int) -> tuple[str, int]:
    """``"host:port"`` (or ``"host"``, ``"[::1]:8080"``) -> ``(host, port)``.

    Raises:
        ValueError: a port that is not an integer 0-65535 (one-line message naming the text).
    """
    host, port_s = text, ""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_s = rest.lstrip(":")
    elif text.count(":") == 1:
        host, port_s = text.split(":")
    if not port_s:
        return host or "127.0.0.1", default_port
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number 0-65535")
    return host or "127.0.0.1", int(port_s)


def parse_peer(text: str, default_port: int) -> tuple[str, int]:
    """:func:`parse_hostport` for an address to connect to (a broker): port 0, which picks a free port
    only for an address to listen on, is refused too.

    Raises:
        ValueError: a port that is not an integer 1-65535 (one-line message naming the text).
    """
    host, port = parse_hostport(text, default_port)
    if port == 0:
        raise ValueError(f"{text!r}: the port must be a number 1-65535 (0 only picks a port to listen on)")
    return host, port
