#!/usr/bin/env python3
"""Developer entry point: the two commands README.md gives.

    python3 tasks.py demo [ARGS...]   create/update .venv, then run the main job
    python3 tasks.py test [PYTEST ARGS...]   create/update .venv, then ruff, mypy and pytest

Only the standard library is used here, so a fresh machine with Python 3.11+ needs nothing else.
The virtual environment is rebuilt from pyproject.toml whenever that file changes; that takes a minute or
so, and every step shows as it happens (the package pip is collecting or installing, with the seconds
spent so far, and a line every 15 s while pip is quiet), so a slow network never looks like a hang.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".tablesense-installed"


def _bin(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / name


_SHOWN = re.compile(r"^(Collecting|Building wheels? |Installing collected packages|Successfully installed|"
                    r"ERROR|WARNING|error:)")
"""pip output lines worth showing as progress (the rest is shown only when pip fails)."""


def run_with_progress(argv: list[str], *, quiet_every: float = 15.0) -> None:
    """Run ``argv`` (pip), printing its progress lines as they come, ``tasks:   [12s] Collecting rich``,
    and ``tasks:   [45s] still working`` after every ``quiet_every`` seconds without one. On failure the
    whole output is printed and ``subprocess.CalledProcessError`` raised."""
    start = time.monotonic()
    last = [start]
    done = threading.Event()

    def say(text: str) -> None:
        now = time.monotonic()
        last[0] = now
        print(f"tasks:   [{now - start:3.0f}s] {text}", flush=True)

    def heartbeat() -> None:
        while not done.wait(min(1.0, quiet_every)):
            if time.monotonic() - last[0] >= quiet_every:
                say("still working")

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "PIP_PROGRESS_BAR": "off"})
    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    output: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            output.append(line)
            if _SHOWN.match(line.strip()):
                say(" ".join(line.split())[:150])
        code = proc.wait()
    finally:
        done.set()
        beat.join()
    if code != 0:
        sys.stdout.write("".join(output))
        raise subprocess.CalledProcessError(code, argv)


def _venv_python_version() -> tuple[int, ...]:
    """The Python version .venv was made with (its ``pyvenv.cfg``), ``()`` when unknown: a .venv left by
    an older python3 (on which the install failed) is made again rather than failing for ever."""
    try:
        lines = (VENV / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ()
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() in {"version", "version_info"}:
            parts = value.strip().split(".")[:2]
            if all(p.isdigit() for p in parts):
                return tuple(int(p) for p in parts)
    return ()


class TasksError(Exception):
    """A step that cannot go on, in one line for the user (printed by :func:`main`, exit status 2)."""


def ensure_venv() -> None:
    """Create .venv if missing and (re)install the project with its dev extra when pyproject changed.

    Raises TasksError when the venv cannot be made (e.g. Debian's python3 without python3-venv, whose
    ``ensurepip`` is missing); the half-made .venv is removed so the next run starts afresh."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if (not _bin("python").exists() or not (_bin("pip").exists() or _bin("pip3").exists())
            or _venv_python_version() < (3, 11)):
        print("tasks: creating .venv", flush=True)
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        except (subprocess.CalledProcessError, OSError) as exc:
            shutil.rmtree(VENV, ignore_errors=True)
            raise TasksError(f"cannot create {VENV} with pip ({exc}); on Debian or Ubuntu install the venv "
                             "module first: sudo apt-get install python3-venv") from None
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    py = str(_bin("python"))
    print("tasks: installing tablesense and its dev tools into .venv (about a minute)", flush=True)
    run_with_progress([py, "-m", "pip", "install", "--disable-pip-version-check", "--upgrade", "pip"])
    run_with_progress([py, "-m", "pip", "install", "--disable-pip-version-check", "-e", f"{ROOT}[dev]"])
    print("tasks: .venv is ready", flush=True)
    STAMP.write_text(digest + "\n")


def run(argv: list[str]) -> int:
    return subprocess.run(argv, cwd=ROOT).returncode


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"demo", "test"}:
        print("usage: python3 tasks.py demo|test [ARGS...]", file=sys.stderr)
        return 2
    if sys.version_info < (3, 11):  # noqa: UP036 - tasks.py runs under whatever python3 the user has
        print(f"tasks: tablesense needs Python 3.11 or newer, this is {sys.version.split()[0]} "
              f"({sys.executable}); run tasks.py with a newer python3", file=sys.stderr)
        return 2
    try:
        ensure_venv()
    except TasksError as exc:
        print(f"tasks: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:  # pip failed; its whole output is printed above
        print(f"tasks: installing into {VENV} failed (pip exit status {exc.returncode}); pip's output is "
              "above", file=sys.stderr)
        return 2
    job, rest = sys.argv[1], sys.argv[2:]
    if job == "demo":
        return run([str(_bin("tablesense")), "demo", *rest])
    for step in (
        [str(_bin("ruff")), "check", "."],
        [str(_bin("mypy"))],
        [str(_bin("python")), "-m", "pytest", *rest],
    ):
        shown = [Path(step[0]).name, *step[1:]]
        print("tasks: $", " ".join(shown), flush=True)
        code = run(step)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
