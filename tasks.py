#!/usr/bin/env python3
"""Developer entry point: the two commands README.md gives.

    python3 tasks.py demo [ARGS...]   create/update .venv, then run the main job
    python3 tasks.py test [PYTEST ARGS...]   create/update .venv, then ruff, mypy and pytest

Only the standard library is used here, so a fresh machine with Python 3.11+ needs nothing else.
The virtual environment is rebuilt from pyproject.toml whenever that file changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".tablesense-installed"


def _bin(name: str) -> Path:
    return VENV / ("Scripts" if os.name == "nt" else "bin") / name


def ensure_venv() -> None:
    """Create .venv if missing and (re)install the project with its dev extra when pyproject changed."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not _bin("python").exists():
        print("tasks: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    if STAMP.exists() and STAMP.read_text().strip() == digest:
        return
    py = str(_bin("python"))
    print("tasks: installing tablesense and its dev tools into .venv", flush=True)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"], check=True)
    STAMP.write_text(digest + "\n")


def run(argv: list[str]) -> int:
    return subprocess.run(argv, cwd=ROOT).returncode


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in {"demo", "test"}:
        print("usage: python3 tasks.py demo|test [ARGS...]", file=sys.stderr)
        return 2
    ensure_venv()
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
