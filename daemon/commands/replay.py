"""``tablesense replay``: play a ``.cap`` capture back through a pseudo-terminal (in the spirit of gpsfake).

    tablesense replay FILE [--speed X] [--link PATH] [--start-now] [--exit-at-end]

The first line on stdout (flushed) is the pty path to point tablesense at (a stable symlink). The
bytes are written exactly as captured, chunk by chunk, at the captured offsets divided by ``--speed``
(``--speed 0``: as fast as possible). Playback starts when the host shows up -- its first bytes, which
for tablesense is the status request it sends on connect -- or at once with ``--start-now``. Host bytes
are otherwise ignored (a capture cannot answer). After the last chunk the pty stays open until Ctrl-C /
SIGTERM, unless ``--exit-at-end``. Exit status 0; 2 for an unreadable capture (one line naming the
file, line and problem): not UTF-8 (e.g. a binary file), larger than :data:`MAX_CAPTURE_BYTES`
(``/dev/zero`` included), or not in the capture format.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tablesense.daemon.bounded import InputTooLarge, read_bounded
from tablesense.daemon.cli import UsageError

if TYPE_CHECKING:
    from tablesense.simulators.capture_format import Capture
    from tablesense.simulators.exposure import PtyExposure

__all__ = ["MAX_CAPTURE_BYTES", "play", "register", "run"]

MAX_CAPTURE_BYTES = 64 << 20
"""A capture file is read only up to 64 MiB (an 8-deck shoe of frames is well under 1 MiB as hex)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``replay`` sub-command."""
    p = subparsers.add_parser(
        "replay", help="play a .cap capture back through a pseudo-terminal",
        description="Play a capture back through a pseudo-terminal; prints the pty path first.")
    p.add_argument("file", metavar="FILE", help="capture file (.cap)")
    p.add_argument("--speed", default="1", metavar="X",
                   help="playback speed factor (default 1; 0 = no pauses)")
    p.add_argument("--link", metavar="PATH", help="pty symlink path (default: a fresh temp dir)/<device>")
    p.add_argument("--start-now", action="store_true", help="start at once instead of waiting for the host")
    p.add_argument("--exit-at-end", action="store_true", help="exit after the last chunk instead of waiting")
    p.set_defaults(func=run)


async def play(capture: Capture, exposure: PtyExposure, *, speed: float, wait_for_host: bool) -> int:
    """Write ``capture``'s chunks to ``exposure`` at ``speed``; return the number of bytes written.

    The exposure must be started. ``speed`` 0 writes without pauses.
    """
    if wait_for_host:
        await exposure.from_host.get()
    loop = asyncio.get_running_loop()
    start = loop.time()
    written = 0
    for chunk in capture.chunks:
        if speed > 0:
            delay = start + chunk.offset / speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        if await exposure.write(chunk.data):
            written += len(chunk.data)
    return written


def run(args: argparse.Namespace) -> int:
    """Entry point of ``tablesense replay``."""
    from tablesense.daemon.logging import configure
    from tablesense.simulators.capture_format import CaptureFormatError, loads
    from tablesense.simulators.exposure import PtyExposure

    try:
        speed = float(args.speed)
    except ValueError:
        raise UsageError(f"replay: --speed must be a number, got {args.speed!r}") from None
    if speed < 0:
        raise UsageError("replay: --speed must be >= 0")
    try:
        data = read_bounded(args.file, MAX_CAPTURE_BYTES)
        cap = loads(data.decode("utf-8"), source=str(args.file))
    except InputTooLarge as exc:
        raise UsageError(f"replay: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"replay: {args.file}: not a tablesense capture (not UTF-8 text at byte "
                         f"{exc.start})") from None
    except CaptureFormatError as exc:
        raise UsageError(f"replay: {exc}") from None
    except OSError as exc:
        raise UsageError(f"replay: cannot read {args.file}: {exc.strerror or exc}") from None
    link_dir: Path | None = None
    link_name = cap.device
    if args.link:
        link = Path(args.link)
        if not link.parent.is_dir():
            raise UsageError(f"replay: --link {args.link}: directory {link.parent} does not exist")
        link_dir, link_name = link.parent, link.name
    configure("warning", stream=sys.stderr)

    async def main() -> None:
        exposure = PtyExposure(link_name, link_dir)
        await exposure.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(exposure.address, flush=True)
        player = asyncio.create_task(play(cap, exposure, speed=speed, wait_for_host=not args.start_now))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({player, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if player.done() and not args.exit_at_end:
                await stopper
            elif player.done():
                await asyncio.sleep(0.2)  # let the reader drain the pty before it goes away
        finally:
            for t in (player, stopper):
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
            await exposure.close()

    asyncio.run(main())
    return 0
