"""Integration fixes found in review (issues 4-6): the app uses the machine's public API only, prunes the
journal, refuses to settle on a damaged journal; the machine's sequence check handles the wrap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_app_touches_no_private_member_of_the_machine() -> None:
    """daemon/app.py seeds a rebuilt machine's bet pads through ``TableMachine.seed_pads`` (it used
    ``machine._pads.update``): ruff's flake8-self rule finds any private member access in the app."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "SLF001",
                          "--output-format", "concise", str(ROOT / "daemon" / "app.py")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
