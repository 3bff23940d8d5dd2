"""``python3 tasks.py demo`` on a machine that is not quite ready ends in one line, never a traceback:
a python3 older than 3.11, a python3 without its venv module (Debian's python3 without python3-venv),
pip failing; and a .venv left by an older python3 is made again instead of failing on every run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("tasks_newcomer", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    venv_dir = tmp_path / ".venv"
    monkeypatch.setattr(module, "VENV", venv_dir)
    monkeypatch.setattr(module, "STAMP", venv_dir / ".tablesense-installed")
    return module


def _fake_venv(path: Path, version: str) -> None:
    (path / "bin").mkdir(parents=True)
    for name in ("python", "pip"):
        (path / "bin" / name).write_text("#!/bin/sh\n")
    (path / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {version}\n")


def test_an_old_python_is_named_in_one_line(tasks: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Under Python 3.10 tasks.py made a 3.10 .venv and pip failed with a traceback."""
    def no_venv() -> None:
        raise AssertionError("no .venv may be made for a python3 that is too old")

    monkeypatch.setattr(tasks, "ensure_venv", no_venv)
    monkeypatch.setattr(sys, "argv", ["tasks.py", "demo"])
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    code = tasks.main()
    monkeypatch.undo()
    assert code == 2
    err = capsys.readouterr().err
    assert "tablesense needs Python 3.11 or newer" in err and len(err.strip().splitlines()) == 1


def test_a_python_without_its_venv_module_is_told_what_to_install(
        tasks: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Debian's python3 without python3-venv: ``ensurepip`` fails inside EnvBuilder.create (a
    CalledProcessError traceback), and the half-made .venv (python, no pip) was reused next time."""
    def create(self: Any, env_dir: Any) -> None:
        _fake_venv(Path(env_dir), "3.11.2")
        (Path(env_dir) / "bin" / "pip").unlink()
        raise subprocess.CalledProcessError(1, [str(Path(env_dir) / "bin" / "python"), "-m", "ensurepip"])

    monkeypatch.setattr(tasks.venv.EnvBuilder, "create", create)
    monkeypatch.setattr(sys, "argv", ["tasks.py", "demo"])
    assert tasks.main() == 2
    err = capsys.readouterr().err
    assert "sudo apt-get install python3-venv" in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not tasks.VENV.exists()


def test_a_failing_pip_ends_in_one_line(tasks: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    _fake_venv(tasks.VENV, "3.11.7")

    def failing_pip(argv: list[str], **_: Any) -> None:
        raise subprocess.CalledProcessError(1, argv)

    monkeypatch.setattr(tasks, "run_with_progress", failing_pip)
    monkeypatch.setattr(sys, "argv", ["tasks.py", "demo"])
    assert tasks.main() == 2
    err = capsys.readouterr().err
    assert "pip exit status 1" in err and len(err.strip().splitlines()) == 1


def test_a_venv_left_by_an_older_python_is_made_again(tasks: ModuleType,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After the 3.10 failure, ``python3.11 tasks.py demo`` found .venv/bin/python and kept the 3.10
    .venv, so pip failed again on every run until the user removed .venv by hand."""
    _fake_venv(tasks.VENV, "3.10.13")
    made: list[Path] = []

    def create(self: Any, env_dir: Any) -> None:
        made.append(Path(env_dir))

    monkeypatch.setattr(tasks.venv.EnvBuilder, "create", create)
    monkeypatch.setattr(tasks, "run_with_progress", lambda argv, **_: None)
    tasks.ensure_venv()
    assert made == [tasks.VENV]
