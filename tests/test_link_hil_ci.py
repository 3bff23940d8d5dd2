"""CI for the hardware-in-the-loop suite: run tests/hil against ``tablesense simulate`` in its own process.

The simulator is started exactly as a technician would (``tablesense simulate shoe --via pty``), its
first stdout line is the device path, and the HIL suite runs in a separate pytest process with
``-m hil --device-url PATH``: every HIL test must pass (none skipped except the baud-rate check,
which does not apply to a pty).
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLESENSE = Path(sys.executable).with_name("tablesense")

pytestmark = pytest.mark.timeout(180)


def _first_line(proc: subprocess.Popen[str], bound: float = 30.0) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(bound):
        raise AssertionError("simulate printed no device path")
    return proc.stdout.readline().strip()


@pytest.mark.parametrize("via", ["pty", "tcp"])
def test_hil_suite_passes_against_a_simulator_process(via: str, tmp_path: Path) -> None:
    cmd = [str(TABLESENSE), "simulate", "shoe", "--via", via, "--seed", "5", "--pace", "0.02",
           "--heartbeat", "0.3"]
    if via == "pty":
        cmd += ["--link", str(tmp_path / "shoe")]
    sim = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        url = _first_line(sim)
        if via == "pty":
            assert url == str(tmp_path / "shoe") and os.path.realpath(url).startswith("/dev/pts/")
        else:
            assert re.fullmatch(r"socket://127\.0\.0\.1:\d+", url)
        env = dict(os.environ, TABLESENSE_HIL_TIMEOUT="20")
        env.pop("TABLESENSE_HIL_URL", None)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/hil", "-m", "hil", "--device-url", url, "-q",
             "-p", "no:cacheprovider", "-rs"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=150)
        out = result.stdout + result.stderr
        assert result.returncode == 0, out
        passed = int(re.search(r"(\d+) passed", out).group(1))  # type: ignore[union-attr]
        assert passed == 5, out
        skipped = re.search(r"(\d+) skipped", out)
        assert skipped is None or (int(skipped.group(1)) == 1 and "baud rate only matters" in out), out
    finally:
        sim.send_signal(signal.SIGTERM)
        try:
            code = sim.wait(timeout=15)
        except subprocess.TimeoutExpired:
            sim.kill()
            raise
        err = sim.stderr.read() if sim.stderr else ""
    assert code == 0, err
    assert "Traceback" not in err
    if via == "pty":
        assert not (tmp_path / "shoe").exists()  # the symlink went away with the device


def test_hil_suite_skips_with_a_reason_without_a_device() -> None:
    env = dict(os.environ)
    env.pop("TABLESENSE_HIL_URL", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "tests/hil", "-q", "-p", "no:cacheprovider",
                             "-rs"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "passed" not in out and "6 skipped" in out
    assert "no device given (pass --device-url URL or set TABLESENSE_HIL_URL)" in out
