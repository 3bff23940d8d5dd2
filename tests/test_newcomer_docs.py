"""docs/install.md and deploy/install.sh as a newcomer follows them: the uninstall commands really
disable the units, and install.sh's last line points at the steps that come next."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL_MD = ROOT / "docs" / "install.md"


def _section(heading: str) -> str:
    text = INSTALL_MD.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def _sh_lines(section: str) -> list[str]:
    """The commands of the section's ``sh`` blocks, continuation lines joined, comments dropped."""
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if line:
                lines.append(line)
    return lines


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl is not installed")
def test_uninstall_disables_the_enabled_table_units(tmp_path: Path) -> None:
    """The uninstall said ``systemctl disable --now 'tablesense@*'``: systemctl refuses globs for
    ``disable`` ("globs are not supported for this"), so the instances stayed enabled, their
    ``multi-user.target.wants`` links left pointing at the unit files the next line removes."""
    units = tmp_path / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    for name in ("tablesense@.service", "tablesense-signage@.service"):
        shutil.copy(ROOT / "deploy" / "systemd" / name, units / name)
    for unit in ("tablesense@bac-01", "tablesense-signage@bac-01"):
        subprocess.run(["systemctl", f"--root={tmp_path}", "enable", unit], check=True,
                       capture_output=True, timeout=30)
    wants = units / "multi-user.target.wants"
    assert sorted(p.name for p in wants.iterdir()) == ["tablesense-signage@bac-01.service",
                                                       "tablesense@bac-01.service"]
    disables = [shlex.split(line) for line in _sh_lines(_section("Uninstall"))
                if line.startswith("sudo systemctl disable")]
    assert disables, "the uninstall names no systemctl disable"
    for argv in disables:
        args = [a for a in argv[3:] if a != "--now"]  # --now needs a running systemd
        subprocess.run(["systemctl", f"--root={tmp_path}", "disable", *args], check=True,
                       capture_output=True, timeout=30)
    assert not wants.exists() or list(wants.iterdir()) == []  # systemctl removes an emptied .wants


def test_install_sh_points_at_the_steps_that_follow_it() -> None:
    """install.sh does steps 2 and 3; its last line said "next: step 5 (table config, secrets,
    enable)", but the table config is step 4 and enabling step 6."""
    script = (ROOT / "deploy" / "install.sh").read_text(encoding="utf-8")
    (last,) = [line for line in script.splitlines() if line.startswith('step "done:')]
    headings = dict(re.findall(r"^## (\d)\. (.+)$", INSTALL_MD.read_text(encoding="utf-8"), re.M))
    assert headings["4"].startswith("The table config") and headings["5"] == "Secrets"
    assert headings["6"] == "Start"
    assert "steps 4 to 6 (table config, secrets, enable)" in last
