"""The signage feed while its broker is away: the shared reconnect backoff, and a prompt clean stop.

* ``SignageServer.run_mqtt`` retries with drivers.backoff.Backoff (full jitter, capped at 5 s), not a
  copy of its own.
* ``tablesense signage`` stopped by SIGTERM while it is still trying to reach a broker that is not there
  exits with status 0 within 5 s (a display must stop when systemd tells it to).
  Real processes, a closed port and a port that drops connection attempts (its listen backlog is full,
  so the kernel discards the SYNs and ``connect()`` blocks, as for a host that has gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablesense.daemon.signage.server import SignageServer

EXE = Path(sys.executable).with_name("tablesense")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@contextlib.contextmanager
def _dropping_port() -> Iterator[int]:
    """A local port whose connection attempts hang: a listening socket that never accepts, its backlog
    filled, so the kernel drops further SYNs (the client retransmits until its connect timeout)."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(("127.0.0.1", port))
            fillers.append(c)
        time.sleep(0.2)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except TimeoutError:
            pass
        else:
            pytest.skip("this kernel does not drop connection attempts to a full listen backlog")
        yield port
    finally:
        for c in fillers:
            c.close()
        listener.close()


class _LowestDraw(random.Random):
    """A random source that records every ``uniform(a, b)`` window asked for and answers ``a``."""

    def __init__(self) -> None:
        super().__init__(0)
        self.windows: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.windows.append((a, b))
        return a


async def test_feed_reconnects_with_the_shared_full_jitter_backoff() -> None:
    """After the n-th failed connect the feed waits a delay drawn from [0, min(5, 0.2 * 2 ** (n - 1))]
    (drivers.backoff.Backoff). Its own copy drew from [c/2, c] with the module's random source, so the
    injected source was never asked and this failed."""
    rng = _LowestDraw()
    server = SignageServer("127.0.0.1", _closed_port(), "T1", "ts-feed", rng=rng)
    task = asyncio.create_task(server.run_mqtt())
    try:
        for _ in range(400):
            if len(rng.windows) >= 7 or task.done():
                break
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rng.windows[:7] == [(0.0, 0.2), (0.0, 0.4), (0.0, 0.8), (0.0, 1.6), (0.0, 3.2), (0.0, 5.0),
                               (0.0, 5.0)]
    assert server.view.broker == "connecting"  # never reached: the page says so, not "feed offline"


def _start(port: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([str(EXE), "signage", "--broker", f"127.0.0.1:{port}", "--table", "T1",
                             "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline()


def _stop(proc: subprocess.Popen[str]) -> tuple[int | None, float, str]:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        code = None
        proc.kill()
        proc.wait()
    elapsed = time.monotonic() - t0
    assert proc.stderr is not None
    return code, elapsed, proc.stderr.read()


@pytest.mark.timeout(120)
def test_sigterm_while_connecting_to_a_closed_port_exits_0() -> None:
    """SIGTERM right after the URL line (the first connects are being refused): exit 0, promptly. The
    signal handler used to be installed only after the URL was printed, so a SIGTERM in between killed
    the process (status -15); every start here must end with 0."""
    outcomes: list[tuple[int | None, float]] = []
    for _ in range(4):
        proc, line = _start(_closed_port())
        assert line.startswith("tablesense signage: table T1 on http://127.0.0.1:"), line
        code, elapsed, err = _stop(proc)
        assert "Traceback" not in err, err
        outcomes.append((code, elapsed))
    assert all(code == 0 and elapsed <= 5.0 for code, elapsed in outcomes), outcomes


@pytest.mark.timeout(120)
def test_sigterm_while_a_connect_hangs_exits_0_at_once() -> None:
    """The broker's address drops connection attempts: paho's blocking connect sits in an executor
    thread for up to its 5 s connect timeout (and name resolution can block longer). SIGTERM must not
    wait for it: before the fix the process exited only when that thread returned (about 5 s here,
    longer with a slow resolver); now the thread is abandoned and the exit takes well under a second
    (bound 2.5 s for a loaded machine; the brief's limit is 5 s)."""
    with _dropping_port() as port:
        proc, line = _start(port)
        assert line.startswith("tablesense signage: table T1 on http://127.0.0.1:"), line
        code, elapsed, err = _stop(proc)
    assert "Traceback" not in err, err
    assert code == 0
    assert elapsed <= 2.5, f"exit took {elapsed:.2f} s after SIGTERM"

