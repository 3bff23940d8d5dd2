"""``tablesense demo`` killed with SIGKILL (no handler can run): the kernel stops its private Mosquitto
(PR_SET_PDEATHSIG), and the next demo removes the temporary directory the dead one left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proc_support import alive, children

from tablesense.daemon.broker import mosquitto_binary
from tablesense.daemon.commands.demo import sweep_stale_dirs

TABLESENSE = str(Path(sys.executable).with_name("tablesense"))

pytestmark = [pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed"),
              pytest.mark.timeout(120)]


def _start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat: when the process started (clock ticks since boot)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _wait_dead(pid: int, bound: float = 5.0) -> bool:
    end = time.monotonic() + bound
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _start_demo(tmpdir: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen([TABLESENSE, "demo", "--no-ui", "--no-signage", "--seed", "4", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def test_a_sigkilled_demo_leaves_no_broker_and_the_next_demo_sweeps_its_directory(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    kept = tmpdir / "tablesense-demo-kept"  # a --keep demo's files: not swept (no live marker)
    kept.mkdir()
    (kept / "daemon.log").write_text("kept\n")
    unrelated = tmpdir / "tablesense-demo-other"  # another user's or a live demo's: not touched
    unrelated.mkdir()
    (unrelated / "demo.pid").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")  # alive
    proc = _start_demo(tmpdir, "--rounds", "100000", "--pace", "0.02")
    broker_pid = None
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert re.search(r"broker 127\.0\.0\.1:\d+", banner), banner
        brokers = [p for p, name in children(proc.pid).items() if name == "mosquitto"]
        assert len(brokers) == 1, children(proc.pid)
        broker_pid = brokers[0]
        (demo_dir,) = [d for d in tmpdir.iterdir() if d not in (kept, unrelated)]
        proc.kill()  # SIGKILL: no clean-up runs
        assert proc.wait(10) == -signal.SIGKILL
        assert _wait_dead(broker_pid), "the demo's broker outlived a SIGKILL of the demo"
        assert demo_dir.is_dir()  # left behind: the next demo sweeps it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if broker_pid is not None and alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
    second = _start_demo(tmpdir, "--rounds", "1", "--keep")
    try:
        _, err = second.communicate(timeout=90)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 0, err[-2000:]
    assert not demo_dir.exists(), "the dead demo's directory was not swept"
    (second_dir,) = [d for d in tmpdir.iterdir() if d not in (kept, unrelated)]
    assert (second_dir / "daemon.log").exists() and not (second_dir / "demo.pid").exists()  # --keep
    assert sweep_stale_dirs(tmpdir) == []  # kept files and a live demo's directory are never swept
    assert sorted(tmpdir.iterdir()) == sorted([kept, unrelated, second_dir])


def test_the_broker_dies_with_the_thread_that_started_it(tmp_path: Path) -> None:
    """The parent-death signal as the broker class sets it: a child process that starts a broker and is
    SIGKILLed takes the broker with it."""
    code = ("import sys, time\nfrom tablesense.daemon.broker import MosquittoBroker\n"
            f"b = MosquittoBroker({str(tmp_path / 'b')!r}, persistence=False, die_with_parent=True)\n"
            "b.start()\nprint(b.pid, flush=True)\ntime.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        broker_pid = int(owner.stdout.readline())
        assert alive(broker_pid)
        owner.kill()
        owner.wait(10)
        assert _wait_dead(broker_pid), "the broker outlived its owner"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
