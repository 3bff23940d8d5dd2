"""Serving a web page's aiohttp application on a ``HOST:PORT`` (the signage display, the floor page)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tablesense.daemon.netaddr import parse_hostport

__all__ = ["serve_app"]


async def serve_app(app: web.Application, listen: str, default_port: int
                    ) -> tuple[str, Callable[[], Awaitable[None]]]:
    """Serve ``app`` on ``listen`` (``HOST:PORT``, ``HOST`` alone takes ``default_port``; port 0: a free
    one) in the running event loop, without an access log, giving open requests 1 s at shutdown.

    Returns ``(url, stop)``: the bound address as a URL (``http://127.0.0.1:8080/``, IPv6 in brackets)
    and a coroutine function that stops the server (the application's cleanup hooks run).

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``.
        OSError: the address cannot be bound (e.g. the port is in use); nothing is left running.
    """
    host, port = parse_hostport(listen, default_port)
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
