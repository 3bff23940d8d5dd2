"""``tablesense demo`` stopped early by SIGTERM, SIGHUP (its terminal closed) or Ctrl-C (SIGINT) stops
everything it started -- its private Mosquitto, the signage server, the daemon -- and removes its temporary
directory, then exits with 128 + the signal number. It used to leave the broker running (adopted by init)
and the directory behind on SIGTERM and SIGHUP. The signal goes to the demo process alone, so the broker
must be stopped by the demo, not by the signal."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proc_support import alive, children

from tablesense.daemon.broker import mosquitto_binary

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]


@pytest.mark.parametrize(("sig", "twice"), [(signal.SIGTERM, False), (signal.SIGHUP, False),
                                           (signal.SIGINT, False), (signal.SIGINT, True)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT", "SIGINT-twice"])
def test_demo_stopped_by_a_signal_cleans_up(sig: signal.Signals, twice: bool, tmp_path: Path) -> None:
    """``twice``: a second Ctrl-C during the clean-up is ignored, so the clean-up completes (with
    ``asyncio.run``'s own SIGINT handler it raised ``KeyboardInterrupt`` in the middle of it)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    proc = subprocess.Popen([TABLESENSE, "demo", "--rounds", "100000", "--no-ui", "--pace", "0.02",
                             "--seed", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    broker_pid = None
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        m = re.search(r"broker 127\.0\.0\.1:(\d+), signage display on http://127\.0\.0\.1:(\d+)/", banner)
        assert m, banner + (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
        signage_port = int(m.group(2))
        brokers = [p for p, name in children(proc.pid).items() if name == "mosquitto"]
        assert len(brokers) == 1, children(proc.pid)
        broker_pid = brokers[0]
        (demo_dir,) = tmpdir.iterdir()
        assert demo_dir.name.startswith("tablesense-demo-")
        for _ in range(200):  # dealing: settlement lines arrive
            if "settle" in proc.stdout.readline():
                break
        time.sleep(0.3)
        proc.send_signal(sig)  # the demo alone, not its process group
        if twice:
            time.sleep(0.05)
            proc.send_signal(sig)
        code = proc.wait(20)
        err = proc.stderr.read() if proc.stderr else ""
        assert code == 128 + sig, (code, err[-2000:])
        assert "Traceback" not in err, err[-3000:]
        assert not alive(broker_pid), "the demo's broker outlived it"
        assert list(tmpdir.iterdir()) == [], list(tmpdir.iterdir())
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", signage_port), timeout=1):
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if broker_pid is not None and alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
