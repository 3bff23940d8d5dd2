"""The systemd units in deploy/systemd/ pass ``systemd-analyze verify`` (Debian's systemd package; no running
systemd needed) without a single warning, and say what a service that stays up needs: ``Restart=always``,
``LoadCredential=`` for the MQTT password, the TLS key and the journal key, ``Wants=``/``After=``
``time-sync.target``, SIGHUP as the reload. CI (``CI`` set) fails instead of skipping when
``systemd-analyze`` is missing: .ci/run installs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNITS = ROOT / "deploy" / "systemd"
INSTANCES = {"tablesense@.service": "tablesense@bac-01.service",
             "tablesense-signage@.service": "tablesense-signage@bac-01.service"}


def _analyzer() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing in CI (.ci/run installs Debian's systemd package)")
        pytest.skip("systemd-analyze not installed (apt-get install systemd)")
    return found


def verify_units(units: Path, work: Path, *, prefix: str | None = None) -> None:
    """``systemd-analyze verify`` every unit in ``units`` (templates as instance ``bac-01``); ``prefix``:
    where ``/opt/tablesense`` really is (the executable must exist). Fails on any message at all, since
    verify reports unknown keys and bad values as warnings with exit status 0."""
    analyzer = _analyzer()
    work.mkdir(parents=True, exist_ok=True)
    if prefix is None:  # the checkout's own console script stands in for the installed one
        prefix = str(work / "opt")
        (work / "opt" / "venv" / "bin").mkdir(parents=True, exist_ok=True)
        link = work / "opt" / "venv" / "bin" / "tablesense"
        if not link.exists():
            link.symlink_to(Path(sys.executable).with_name("tablesense"))
    names = sorted(p.name for p in units.glob("*.service"))
    assert names == sorted(INSTANCES), names
    for name in names:
        text = (units / name).read_text().replace("/opt/tablesense", prefix)
        (work / name).write_text(text)
    proc = subprocess.run([analyzer, "verify", "--man=no", *(INSTANCES[n] for n in names)], cwd=work,
                          capture_output=True, text=True, timeout=120)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0 and not out, out


def test_units_verify_cleanly(tmp_path: Path) -> None:
    verify_units(UNITS, tmp_path)


def test_verify_catches_a_misspelt_key(tmp_path: Path) -> None:
    """The check itself can fail: a unit with an unknown key is reported."""
    bad = tmp_path / "units"
    bad.mkdir()
    for p in UNITS.glob("*.service"):
        (bad / p.name).write_text(p.read_text().replace("Restart=always", "Restart=always\nRestartt=always"))
    with pytest.raises(AssertionError, match="Unknown key 'Restartt'"):
        verify_units(bad, tmp_path / "work")


def _directives(name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_unit_stays_up_and_waits_for_the_clock(name: str) -> None:
    d = _directives(name)
    assert d["Restart"] == ["always"]
    for key in ("Wants", "After"):
        assert any("time-sync.target" in v.split() for v in d[key]), key
    assert d["DynamicUser"] == ["yes"]
    assert "mqtt" in {v.split(":")[0] for v in d["LoadCredential"]}


def test_daemon_unit_loads_its_three_secrets_and_reloads_with_sighup() -> None:
    d = _directives("tablesense@.service")
    creds = dict(v.split(":", 1) for v in d["LoadCredential"])
    assert creds == {"mqtt": "tablesense-%i.mqtt", "tls-key": "tablesense-%i.tls-key",
                     "journal-key": "tablesense-%i.journal-key"}
    # relative names: looked up in /etc/credstore/, and a missing one (no client certificate) is skipped
    assert not any(v.startswith("/") for v in creds.values())
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert d["Type"] == ["notify"] and d["WatchdogSec"] == ["30"]
    assert d["ExecStart"] == ["/opt/tablesense/venv/bin/tablesense run --config /etc/tablesense/%i.toml"]
    assert d["StateDirectory"] == ["tablesense/%i"]


def test_example_configs_name_the_unit_credentials() -> None:
    """The production examples read their secrets where the unit puts them."""
    named = 0
    for example in (ROOT / "deploy" / "examples").glob("*.toml"):
        for line in example.read_text().splitlines():
            if re.match(r"(credentials_file|key_file) =", line):
                assert re.search(r'= "\$\{CREDENTIALS_DIRECTORY\}/(mqtt|tls-key|journal-key)"', line), line
                named += 1
    assert named
