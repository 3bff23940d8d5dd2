"""``python3 tasks.py`` shows progress while it installs (it used to run pip with ``--quiet`` and print
nothing for a minute): pip's "Collecting ..." lines appear while pip still runs, a "still working" line
when pip is quiet for long, and pip's whole output when it fails."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tasks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tasks_under_test", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_progress_lines_appear_while_the_installer_runs(tmp_path: Path) -> None:
    """The fake pip prints a line, then waits until the test has SEEN that line (it creates a file): with
    the progress hidden until the end, the line would arrive only after the wait ran out."""
    seen = tmp_path / "seen"
    fake_pip = textwrap.dedent(f"""
        import pathlib, sys, time
        print("Collecting rich>=13.7", flush=True)
        print("  Using cached rich-14.0.0-py3-none-any.whl", flush=True)
        deadline = time.monotonic() + 20
        while not pathlib.Path({str(seen)!r}).exists():
            if time.monotonic() > deadline:
                sys.exit(3)
            time.sleep(0.05)
        print("Successfully installed rich-14.0.0", flush=True)
    """)
    runner = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("t", {str(ROOT / "tasks.py")!r})
        t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
        t.run_with_progress([sys.executable, "-c", {fake_pip!r}])
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert proc.poll() is None, "the progress line came only after the installer had finished"
    assert first.startswith("tasks:   [") and first.rstrip().endswith("Collecting rich>=13.7"), first
    seen.touch()
    rest = proc.stdout.read()
    assert proc.wait(20) == 0
    assert "Successfully installed rich-14.0.0" in rest and "Using cached" not in rest


def test_a_quiet_installer_gets_a_heartbeat(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    _tasks().run_with_progress([sys.executable, "-c", "import time; time.sleep(2.6)"], quiet_every=1.0)
    assert time.monotonic() - start >= 2.5
    assert capsys.readouterr().out.count("still working") >= 2


def test_a_failing_installer_shows_everything(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        _tasks().run_with_progress([sys.executable, "-c",
                                    "print('detail 1'); print('ERROR: no such package'); exit(1)"])
    out = capsys.readouterr().out
    assert "ERROR: no such package" in out and "detail 1" in out
