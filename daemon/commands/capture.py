"""``tablesense capture``: record a device's raw bytes with timestamps into a ``.cap`` file.

    tablesense capture URL --out FILE [--seconds N] [--baud B] [--device NAME] [--protocol P]
                           [--notes TEXT] [--poke]

``URL`` is anything a device link opens (a device path, ``socket://``, ``rfc2217://``, ``usb://``).
Every chunk is written as soon as it is read, with its offset in seconds since the capture started
(the format is :mod:`simulators.capture_format`, gpsd-style: header lines, then ``+seconds hex``). It
stops after ``--seconds`` (default: until Ctrl-C / SIGTERM) or when the link is lost; what was
captured is kept either way. The capture listens only; ``--poke`` sends one status request of the
protocol first (a simulator started without ``--start-now`` waits for one).

Exit status: 0 when the time ran out or on Ctrl-C, 1 when the link was lost, 2 for a usage error
(including a device that cannot be opened: one line naming the device and the cause).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from datetime import UTC, datetime
from typing import TextIO

from tablesense.daemon.cli import UsageError

__all__ = ["capture", "register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``capture`` sub-command."""
    p = subparsers.add_parser(
        "capture", help="record a device's raw bytes with timestamps (.cap)",
        description="Record the raw bytes a device sends, with timestamps, into a .cap capture file "
                    "(replay it with 'tablesense replay').")
    p.add_argument("url", metavar="URL", help="device path, socket://, rfc2217:// or usb:// URL")
    p.add_argument("--out", metavar="FILE", help="capture file to write (required; '-' for stdout)")
    p.add_argument("--seconds", metavar="N", help="stop after N seconds (default: until Ctrl-C)")
    p.add_argument("--baud", default="9600", metavar="B", help="serial line speed (default 9600)")
    p.add_argument("--device", default="shoe", metavar="NAME", help="device name for the header (shoe)")
    p.add_argument("--protocol", default="tsref", metavar="P", help="protocol for the header (tsref)")
    p.add_argument("--notes", default="", metavar="TEXT", help="free-text notes for the header")
    p.add_argument("--poke", action="store_true", help="send one status request after opening")
    p.set_defaults(func=run)


async def capture(url: str, out: TextIO, *, seconds: float | None, baud: int, device: str, protocol: str,
                  notes: str = "", poke: bool = False,
                  stop: asyncio.Event | None = None) -> tuple[int, int, str]:
    """Capture ``url`` into ``out``; return ``(chunks, bytes, why it stopped)``.

    ``why`` is ``"time"``, ``"stopped"`` or ``"lost: <cause>"``. Raises
    :class:`drivers.transports.OpenError` if the device cannot be opened.
    """
    from tablesense.drivers.protocols import get_codec
    from tablesense.drivers.transports import LinkLost, open_transport
    from tablesense.simulators.capture_format import CaptureWriter

    transport = await open_transport(url, baud=baud)
    loop = asyncio.get_running_loop()
    started = loop.time()
    meta = {"source": url, "serial": f"{baud} 8N1",
            "started": datetime.now(UTC).isoformat(timespec="seconds")}
    writer = CaptureWriter(out, device, protocol, notes, meta)
    why = "stopped"
    stop = stop or asyncio.Event()
    try:
        if poke:
            await transport.write(get_codec(protocol)(device).status_request())
        stopper = asyncio.create_task(stop.wait())
        try:
            while True:
                remaining = None if seconds is None else started + seconds - loop.time()
                if remaining is not None and remaining <= 0:
                    why = "time"
                    break
                reader = asyncio.create_task(transport.read())
                done, _ = await asyncio.wait({reader, stopper}, timeout=remaining,
                                             return_when=asyncio.FIRST_COMPLETED)
                if reader not in done:
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError, LinkLost):
                        await reader
                    if stopper in done:
                        why = "stopped"
                        break
                    continue
                try:
                    data = reader.result()
                except LinkLost as exc:
                    why = f"lost: {exc.cause}"
                    break
                writer.write(loop.time() - started, data)
        finally:
            stopper.cancel()
    finally:
        await transport.close()
    return writer.chunks, writer.bytes, why


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tablesense capture``."""
    from tablesense.drivers.protocols import UnknownProtocol, get_codec
    from tablesense.drivers.transports import OpenError

    if not args.out:
        raise UsageError("capture: --out FILE is required (use '-' for stdout)")
    try:
        seconds = None if args.seconds is None else float(args.seconds)
        baud = int(args.baud)
    except ValueError:
        raise UsageError("capture: --seconds and --baud must be numbers") from None
    if (seconds is not None and seconds <= 0) or baud <= 0:
        raise UsageError("capture: --seconds and --baud must be positive")
    if args.poke:
        try:
            get_codec(args.protocol)
        except UnknownProtocol as exc:
            raise UsageError(f"capture: {exc}") from None
    try:
        out: TextIO = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"capture: cannot write {args.out}: {exc.strerror or exc}") from None

    async def main() -> tuple[int, int, str]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await capture(args.url, out, seconds=seconds, baud=baud, device=args.device,
                             protocol=args.protocol, notes=args.notes, poke=args.poke, stop=stop)

    try:
        chunks, size, why = asyncio.run(main())
    except OpenError as exc:
        raise UsageError(f"capture: {exc}") from None
    except ValueError as exc:  # a header value the format cannot hold (e.g. a newline in --notes)
        raise UsageError(f"capture: {exc}") from None
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"tablesense: captured {chunks} chunks, {size} bytes from {args.url} to {args.out} ({why})",
          file=sys.stderr)
    return 1 if why.startswith("lost") else 0
