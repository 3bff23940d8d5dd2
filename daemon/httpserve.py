"""Serving a web page's aiohttp application on a ``HOST:PORT`` (the signage display, the floor page)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tablesense.daemon.netaddr import is_loopback, parse_hostport

__all__ = ["loopback_host_only", "serve_app"]


def _request_host(header: str) -> str:
    """The host name of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def loopback_host_only(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """aiohttp middleware for a page bound to a loopback address: a request whose ``Host`` header names
    anything but ``localhost`` or a loopback address is refused with 421 Misdirected Request, before any
    handler runs. A page served on loopback is reached only from its own machine; a ``Host`` naming
    another name is a browser led there by a hostile web page whose name was made to resolve to
    127.0.0.1 (DNS rebinding), which would otherwise read the page's JSON (the floor's figures, a
    display's state) with the browser's access to the machine. RFC 9110 §7.2 (Host), §15.5.20 (421)."""
    if not is_loopback(_request_host(request.headers.get("Host", ""))):
        return web.Response(status=421, text="misdirected request: this page answers only to localhost or "
                                             "a loopback address\n")
    return await handler(request)


async def serve_app(app: web.Application, listen: str, default_port: int
                    ) -> tuple[str, Callable[[], Awaitable[None]]]:
    """Serve ``app`` on ``listen`` (``HOST:PORT``, ``HOST`` alone takes ``default_port``; port 0: a free
    one) in the running event loop, without an access log, giving open requests 1 s at shutdown. Bound
    to a loopback address, it answers only requests naming a loopback host (:func:`loopback_host_only`:
    DNS rebinding); bound to another address, the operator chose who may reach it.

    Returns ``(url, stop)``: the bound address as a URL (``http://127.0.0.1:8080/``, IPv6 in brackets)
    and a coroutine function that stops the server (the application's cleanup hooks run).

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``.
        OSError: the address cannot be bound (e.g. the port is in use); nothing is left running.
    """
    host, port = parse_hostport(listen, default_port)
    if is_loopback(host) and loopback_host_only not in app.middlewares:
        app.middlewares.insert(0, loopback_host_only)  # first: before any handler or other check
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound: Any = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
    return f"http://{shown}:{bound[1]}/", runner.cleanup
