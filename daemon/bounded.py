"""Bounded reads of user-named files (docs/security.md "Bounds": config sizes, command inputs).

``Path.read_bytes()`` trusts ``st_size``, which is 0 for ``/dev/zero``, a FIFO or a pipe, and then reads
until EOF -- 7 GB of RSS for ``/dev/zero``. :func:`read_bounded` reads at most ``limit + 1`` bytes
whatever the file is, so memory stays bounded by the limit. Reading a FIFO that has no writer blocks
until one opens it: that is ordinary Unix behaviour and not changed here (docs/security.md "Bounds").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

__all__ = ["InputTooLarge", "read_bounded", "read_bounded_stream"]


class InputTooLarge(ValueError):
    """More than the allowed number of bytes; ``str()`` is one line naming the source and the limit."""


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % 1024 == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"


def read_bounded_stream(stream: BinaryIO, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes from ``stream`` (read until EOF, but never more than ``limit + 1``).

    Raises:
        InputTooLarge: the stream holds more than ``limit`` bytes (``what`` names it in the message).
        OSError: the read failed.
    """
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = stream.read(min(1 << 16, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise InputTooLarge(f"{what} is larger than {limit} bytes ({_size(limit)})")
    return b"".join(chunks)


def read_bounded(path: str | Path, limit: int, what: str | None = None) -> bytes:
    """The bytes of the file at ``path`` (``"-"``: standard input), at most ``limit`` of them.

    Works for regular files, character devices, FIFOs and pipes alike: never more than ``limit + 1``
    bytes are read. ``what`` names the input in the error (default: the path).

    Raises:
        InputTooLarge: more than ``limit`` bytes.
        OSError: the file cannot be opened or read (a directory: ``IsADirectoryError``).
    """
    name = what or str(path)
    if str(path) == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            return read_bounded_stream(buffer, limit, name)
        data = sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")  # a text-only stdin (tests)
        if len(data) > limit:
            raise InputTooLarge(f"{name} is larger than {limit} bytes ({_size(limit)})")
        return data
    with open(path, "rb") as stream:
        return read_bounded_stream(stream, limit, name)
