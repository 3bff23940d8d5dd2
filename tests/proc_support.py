"""Reading /proc in the tests that check what a command leaves running (the demo's broker, signage and
daemon after a signal or a SIGKILL)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def children(pid: int) -> dict[int, str]:
    """``{pid: command name}`` of the processes whose parent is ``pid``."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            text = stat.read_text()
            name = text[text.index("(") + 1:text.rindex(")")]
            ppid = int(text[text.rindex(")") + 2:].split()[1])
            if ppid == pid:
                out[int(stat.parent.name)] = name
    return out


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
