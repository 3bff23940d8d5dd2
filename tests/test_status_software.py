"""The retained status's ``software`` comes from one place, daemon.version.software_version() (the
installed package's metadata), the same function ``tablesense --version`` prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from machine_support import baccarat_config

from tablesense.daemon import version
from tablesense.daemon.app import App


def _status_software(app: App) -> str:
    software: str = json.loads(app._status_payload("online"))["software"]
    return software


def test_status_software_is_what_tablesense_version_prints() -> None:
    printed = subprocess.run([str(Path(sys.executable).with_name("tablesense")), "--version"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    software = _status_software(App(baccarat_config()))
    assert printed == f"tablesense {software}"
    assert software == version.software_version() != ""


def test_status_software_follows_the_version_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the metadata lookup of daemon.version answering something else, the status says the same:
    the app has no second copy of the lookup (it had one, returning "unknown" where daemon.version
    returns "0+unknown", and reading the metadata itself, so this failed)."""
    monkeypatch.setattr(version, "version", lambda _dist: "7.7.7+status.test")
    version.software_version.cache_clear()
    try:
        assert _status_software(App(baccarat_config())) == "7.7.7+status.test"

        def missing(dist: str) -> str:
            raise version.PackageNotFoundError(dist)

        monkeypatch.setattr(version, "version", missing)
        version.software_version.cache_clear()
        assert _status_software(App(baccarat_config())) == "0+unknown" == version.software_version()
    finally:
        monkeypatch.undo()
        version.software_version.cache_clear()
