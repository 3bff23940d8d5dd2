"""The installed wheel, outside the checkout: build it, install it with deploy/install.sh into a clean
virtual environment under a temporary directory (``--destdir``, no root, no running systemd needed), and
run every command an operator runs from another directory (docs/install.md).

Checked: the wheel holds one top-level import name (``tablesense``) and every file a command reads at run
time (signage page, example configs, JSON Schemas, broker config templates, units, udev rule);
``tablesense --version`` is the package metadata's version; ``tablesense demo --rounds 3 --no-ui`` deals
and settles three rounds; ``tablesense signage`` serves its page, its static files and its event stream;
``tablesense schemas --check`` finds the installed schemas current; ``tablesense analyze`` and
``check-config`` work; the installed units pass ``systemd-analyze verify``; python-daemon installs beside
tablesense without touching it. Each step prints its wall time (``-s``), the CI cost of this file.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tablesense.daemon.broker import MosquittoBroker, mosquitto_binary

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
_SKIP_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                                        ".hypothesis", "*.egg-info")
_SKIP_AT_TOP = {".venv", ".git", "build", "dist", "journal"}


def _skip_copy(directory: str, names: list[str]) -> set[str]:
    """What the wheel build does not need: caches anywhere, and the checkout's own venv, git and outputs."""
    skip = set(_SKIP_ANYWHERE(directory, names))
    return skip | (_SKIP_AT_TOP & set(names) if Path(directory) == ROOT else set())

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _timed(label: str, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    print(f"INSTALL-TIME {label}: {time.monotonic() - start:.1f} s")
    assert proc.returncode == 0, (f"{label} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-3000:]}")
    return proc  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the working tree (the build writes build/ and *.egg-info)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_skip_copy)
    _timed("build wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                           "-q", "-w", str(base / "dist"), str(src)])
    (found,) = (base / "dist").glob("tablesense-*.whl")
    return found


@pytest.fixture(scope="module")
def staged(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/install.sh --destdir: a production install staged under a temporary root."""
    root = tmp_path_factory.mktemp("root")
    proc = _timed("install.sh (venv + wheel + dependencies)",
                  ["sh", str(ROOT / "deploy" / "install.sh"), "--destdir", str(root), str(wheel)])
    assert "done: tablesense " + VERSION in proc.stdout
    return root


@pytest.fixture(scope="module")
def env(staged: Path) -> dict[str, str]:
    """The environment of an operator's shell: the installed venv first on PATH, nothing of the checkout."""
    venv_bin = staged / "opt" / "tablesense" / "venv" / "bin"
    e = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    path = [p for p in e.get("PATH", "/usr/bin:/bin").split(os.pathsep) if not p.startswith(str(ROOT))]
    e["PATH"] = os.pathsep.join([str(venv_bin), *path, "/usr/sbin"])
    return e


@pytest.fixture()
def elsewhere(tmp_path: Path) -> Path:
    """A working directory that is not the checkout (relative paths cannot find the repo's files)."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    return d


def _tablesense(staged: Path) -> str:
    return str(staged / "opt" / "tablesense" / "venv" / "bin" / "tablesense")


def test_wheel_has_one_import_name_and_its_package_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"tablesense", f"tablesense-{VERSION}.dist-info"}, tops
    for needed in ("tablesense/daemon/signage/static/index.html", "tablesense/daemon/signage/static/app.js",
                   "tablesense/daemon/signage/static/style.css", "tablesense/daemon/signage/static/i18n.js",
                   "tablesense/daemon/signage/static/favicon.ico",
                   "tablesense/daemon/floor/static/floor.html", "tablesense/daemon/floor/static/floor.js",
                   "tablesense/daemon/floor/static/floor.css",
                   "tablesense/deploy/examples/baccarat.toml", "tablesense/deploy/examples/uth.toml",
                   "tablesense/deploy/mosquitto/tablesense-tls.conf", "tablesense/deploy/mosquitto/acl",
                   "tablesense/deploy/systemd/tablesense@.service",
                   "tablesense/deploy/systemd/tablesense-signage@.service",
                   "tablesense/deploy/udev/70-tablesense.rules", "tablesense/deploy/install.sh",
                   "tablesense/deploy/grafana/tablesense.json", "tablesense/schemas/tablesense.health.json",
                   "tablesense/schemas/tablesense.settlement.json", "tablesense/py.typed"):
        assert needed in names, needed
    shipped = {p.name for p in (ROOT / "docs" / "schemas").glob("*.json")}
    assert shipped == {n.rsplit("/", 1)[1] for n in names if n.startswith("tablesense/schemas/")}


def test_installed_commands_run_outside_the_checkout(staged: Path, env: dict[str, str],
                                                     elsewhere: Path) -> None:
    ts = _tablesense(staged)
    run = {"cwd": elsewhere, "env": env, "timeout": 300}
    where = _timed("import location", ["python", "-c", "import tablesense; print(tablesense.__file__)"],
                   **run).stdout.strip()
    assert where.startswith(str(staged / "opt" / "tablesense" / "venv")), where

    assert _timed("--version", [ts, "--version"], **run).stdout.strip() == f"tablesense {VERSION}"

    demo = _timed("demo --rounds 3 --no-ui --floor",
                  [ts, "demo", "--rounds", "3", "--no-ui", "--seed", "3", "--floor"], **run)
    assert re.search(r"table demo-baccarat \(baccarat\): 3 rounds settled", demo.stdout), demo.stdout[-2000:]
    assert "signage display on http://127.0.0.1:" in demo.stdout
    assert "floor page on http://127.0.0.1:" in demo.stdout

    check = _timed("schemas --check", [ts, "schemas", "--check"], **run)
    assert "match the message models" in check.stdout

    analysis = _timed("analyze", [ts, "analyze", "--game", "baccarat", "--decks", "8"], **run)
    assert "house edge" in analysis.stdout and "perfect_pairs" in analysis.stdout

    example = staged / "etc" / "tablesense" / "examples" / "baccarat.toml"
    ok = _timed("check-config", [ts, "check-config", str(example), "--template"], **run)
    assert ok.stdout.startswith("ok: bac-01 (baccarat, 8 decks")
    assert list(elsewhere.iterdir()) == []  # nothing written into the working directory


@pytest.mark.skipif(mosquitto_binary() is None, reason="mosquitto binary not installed")
def test_installed_signage_serves_page_and_event_stream(staged: Path, env: dict[str, str],
                                                        elsewhere: Path, tmp_path: Path) -> None:
    with MosquittoBroker(tmp_path / "broker") as broker:
        start = time.monotonic()
        proc = subprocess.Popen([_tablesense(staged), "signage", "--broker", f"{broker.host}:{broker.port}",
                                 "--table", "bac-01", "--listen", "127.0.0.1:0"],
                                cwd=elsewhere, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            m = re.search(r"on (http://127\.0\.0\.1:\d+/)", line)
            assert m, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
            url = m.group(1)
            with urllib.request.urlopen(url, timeout=10) as r:
                page = r.read().decode()
            assert r.status == 200 and "<html" in page.lower()
            for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', page):
                with urllib.request.urlopen(url.rstrip("/") + asset, timeout=10) as r:
                    assert r.status == 200 and r.read(), asset
            with urllib.request.urlopen(url + "events", timeout=10) as r:
                assert r.headers["Content-Type"].startswith("text/event-stream")
                stream = b""  # state events until one shows the display connected to the broker
                while not re.search(rb'(^|\n)event: state\ndata: \{[^\n]*"broker":"connected"[^\n]*\}\n\n',
                                    stream):
                    chunk = r.read1(4096)
                    assert chunk, stream[-300:]
                    stream += chunk
            print(f"INSTALL-TIME signage page and event stream: {time.monotonic() - start:.1f} s")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            assert code == 0, proc.stderr.read() if proc.stderr else ""


def test_install_sh_lays_out_units_udev_and_directories(staged: Path, tmp_path: Path) -> None:
    units = staged / "etc" / "systemd" / "system"
    assert sorted(p.name for p in units.iterdir()) == ["tablesense-signage@.service", "tablesense@.service"]
    daemon = (units / "tablesense@.service").read_text()
    assert "ExecStart=/opt/tablesense/venv/bin/tablesense run --config /etc/tablesense/%i.toml" in daemon
    assert (staged / "etc" / "udev" / "rules.d" / "70-tablesense.rules").is_file()
    assert stat.S_IMODE((staged / "etc" / "credstore").stat().st_mode) == 0o700
    assert sorted(p.name for p in (staged / "etc" / "tablesense" / "examples").iterdir()) == [
        "baccarat.toml", "blackjack.toml", "ez-baccarat.toml", "uth.toml"]
    # the installed units verify against the installed binary (paths moved under the staging root)
    from test_systemd_units import verify_units

    verify_units(units, tmp_path, prefix=str(staged / "opt" / "tablesense"))


def test_install_sh_again_upgrades_in_place_and_coexists_with_python_daemon(
        staged: Path, wheel: Path, env: dict[str, str], elsewhere: Path) -> None:
    """A second run keeps the venv (an upgrade); python-daemon's ``daemon`` package then installs beside
    tablesense without overwriting anything of it, and both import."""
    (staged / "etc" / "tablesense" / "bac-01.toml").write_text("# the operator's config\n")
    proc = _timed("install.sh again (upgrade)",
                  ["sh", str(ROOT / "deploy" / "install.sh"), "--destdir", str(staged), str(wheel)])
    assert "upgrading the virtual environment" in proc.stdout
    assert (staged / "etc" / "tablesense" / "bac-01.toml").read_text() == "# the operator's config\n"
    py = str(staged / "opt" / "tablesense" / "venv" / "bin" / "python")
    _timed("pip install python-daemon", [py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                         "python-daemon"], env=env, cwd=elsewhere)
    # python-daemon's own top-level name, imported by name so the bare-import check stays meaningful
    both = _timed("import both", [py, "-c", "import importlib, tablesense.daemon.cli as c; "
                                            "d = importlib.import_module('daemon'); "
                                            "importlib.import_module('daemon.daemon'); "
                                            "print(d.__file__); print(c.__file__)"],
                  env=env, cwd=elsewhere)
    assert "site-packages/daemon/__init__.py" in both.stdout
    assert "site-packages/tablesense/daemon/cli.py" in both.stdout
    assert _timed("--version", [_tablesense(staged), "--version"], env=env,
                  cwd=elsewhere).stdout.strip() == f"tablesense {VERSION}"


@pytest.fixture(autouse=True, scope="module")
def _no_stray_build_files() -> Iterator[None]:
    """The wheel build runs in a copy: the checkout gets no build/ or *.egg-info from this file."""
    before = {p.name for p in ROOT.iterdir()}
    yield
    after = {p.name for p in ROOT.iterdir()}
    assert not {n for n in after - before if n == "build" or n.endswith(".egg-info")}
