"""sd_notify over a real datagram socket, and the JSON log lines with bound table/shoe/round context."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
from pathlib import Path

import pytest
import structlog

from tablesense.daemon import sdnotify
from tablesense.daemon.logging import bind_round, bind_table, configure, get_logger


def test_notify_sends_datagrams_to_notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert sdnotify.notify("READY=1")
        assert sdnotify.notify("WATCHDOG=1")
        assert [server.recv(64), server.recv(64)] == [b"READY=1", b"WATCHDOG=1"]


def test_notify_abstract_socket_and_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"tablesense-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert sdnotify.notify("STOPPING=1")
        assert server.recv(64) == b"STOPPING=1"
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert not sdnotify.notify("READY=1")


def test_watchdog_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    assert sdnotify.watchdog_interval() == 15.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert sdnotify.watchdog_interval() is None
    monkeypatch.delenv("WATCHDOG_PID")
    monkeypatch.setenv("WATCHDOG_USEC", "junk")
    assert sdnotify.watchdog_interval() is None


def test_json_lines_with_context_and_priority_prefix() -> None:
    buf = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure("info", stream=buf, priority_prefix=True)
    try:
        structlog.contextvars.clear_contextvars()
        bind_table("BAC-01")
        bind_round(3, 41)
        get_logger().error("settlement_failed", spot="4")
        get_logger().debug("hidden")
        logging.getLogger("mqtt").warning("paho says %s", "hi")
    finally:
        structlog.contextvars.clear_contextvars()
        structlog.reset_defaults()
        root.handlers[:], root.level = saved[0], saved[1]
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("<3>{")
    first = json.loads(lines[0][3:])
    assert first["event"] == "settlement_failed" and first["level"] == "error"
    assert (first["table"], first["shoe"], first["round"], first["spot"]) == ("BAC-01", 3, 41, "4")
    assert lines[1].startswith("<4>{")
    second = json.loads(lines[1][3:])
    assert second["event"] == "paho says hi" and second["logger"] == "mqtt" and second["table"] == "BAC-01"
