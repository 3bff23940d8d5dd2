"""A private MQTT broker on a free loopback port, for `tablesense demo`, tests and benchmarks.

:class:`MosquittoBroker` runs the ``mosquitto`` binary (2.x, MQTT v5) with a generated config in its own
directory (persistence on, autosave every second, large queues: mosquitto.conf(5) persistence,
autosave_interval, max_queued_messages), so a caller can
stop, kill and restart it. :class:`AmqttBroker` is the in-process fallback when the binary is absent
(amqtt 0.12, MQTT 3.1.1 only: the daemon falls back to 3.1.1 against it).
Neither ever binds anything but 127.0.0.1.

``die_with_parent``: the broker is started with the Linux parent-death signal set (prctl(2)
``PR_SET_PDEATHSIG``), so the kernel stops it (SIGTERM) when the thread that started it ends, also when
its owner is killed with SIGKILL and no clean-up can run (``tablesense demo``); no orphaned broker is left
behind (PPID 1). The setting survives ``execve`` and is cleared only by a change of the process's
effective user or group, which mosquitto's ``user`` line here never makes (it names the user already
running it).
"""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import importlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ["AmqttBroker", "BrokerError", "MosquittoBroker", "free_port", "mosquitto_binary"]


class BrokerError(RuntimeError):
    """The broker could not be started (one-line reason, includes the tail of its log)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str | None:
    """Path of the ``mosquitto`` executable (``$PATH``, then /usr/sbin), or ``None``."""
    found = shutil.which("mosquitto")
    if found:
        return found
    for candidate in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


_PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal the calling process gets when its parent (the thread that forked it)
ends (<linux/prctl.h>)."""


def _parent_death_signal(signum: int) -> Any:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the child get ``signum`` when its parent
    ends, or ``None`` where prctl(2) is not available (not Linux). Runs in the child between fork and
    exec, so it only calls the C library (loaded here, before the fork) and ``os`` functions; if the
    parent has already ended by then, the child ends itself."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
            return  # not supported: the owner's own clean-up still stops the broker
        if os.getppid() != parent:  # the parent died before the setting took effect
            os.kill(os.getpid(), signum)

    return preexec


def _wait_port(host: str, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return True
        time.sleep(0.02)
    return False


class MosquittoBroker:
    """A ``mosquitto`` process owned by the caller.

    ``directory``: where the config, log and persistence files go (created). ``port``: fixed port or
    ``None`` for a free one (kept across restarts). ``acl_file``/``password_file``: optional Mosquitto
    ACL and password files; ``allow_anonymous`` as in mosquitto.conf(5). ``extra``: more config lines.
    ``die_with_parent``: the kernel stops the broker when the thread that called :meth:`start` ends
    (module docstring; call :meth:`start` from a thread that lives as long as the owner, e.g. the main
    thread). Use as a context manager or call :meth:`start`/:meth:`stop`. Raises :class:`BrokerError`
    when the binary is missing or the broker does not listen within ``start_timeout`` seconds.
    """

    host = "127.0.0.1"

    def __init__(self, directory: str | os.PathLike[str], port: int | None = None, *,
                 acl_file: str | None = None, password_file: str | None = None,
                 allow_anonymous: bool = True, persistence: bool = True, extra: str = "",
                 start_timeout: float = 10.0, die_with_parent: bool = False) -> None:
        binary = mosquitto_binary()
        if binary is None:
            raise BrokerError("the mosquitto binary was not found (install the mosquitto package)")
        self.binary = binary
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.conf = self.directory / "mosquitto.conf"
        self.log = self.directory / "mosquitto.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._start_timeout = start_timeout
        self.die_with_parent = die_with_parent
        lines = [
            f"listener {self.port} {self.host}",
            f"allow_anonymous {'true' if allow_anonymous else 'false'}",
            "max_queued_messages 100000",
            "max_inflight_messages 100",
            "persistent_client_expiration 1d",
            "set_tcp_nodelay true",
        ]
        if persistence:
            (self.directory / "data").mkdir(exist_ok=True)
            lines += ["persistence true", f"persistence_location {self.directory / 'data'}/",
                      "autosave_interval 1"]
        if os.geteuid() == 0:
            # as root mosquitto switches to user "mosquitto", which cannot write our temp directory
            lines.append(f"user {getpass.getuser()}")
        if acl_file:
            lines.append(f"acl_file {acl_file}")
        if password_file:
            lines.append(f"password_file {password_file}")
        if extra:
            lines.append(extra)
        self.conf.write_text("\n".join(lines) + "\n")

    @property
    def url(self) -> str:
        """``HOST:PORT`` as ``--broker`` takes it."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id while running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start mosquitto and wait until it accepts connections."""
        if self.pid is not None:
            return
        preexec = _parent_death_signal(signal.SIGTERM) if self.die_with_parent else None
        with open(self.log, "ab") as logf:
            self._proc = subprocess.Popen([self.binary, "-c", str(self.conf)], stdout=logf,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=preexec)
        if not _wait_port(self.host, self.port, time.monotonic() + self._start_timeout):
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
            self.stop(kill=True)
            raise BrokerError(f"mosquitto did not start on port {self.port}: {' '.join(tail)}")

    def stop(self, kill: bool = False, timeout: float = 5.0) -> None:
        """Stop it (SIGTERM, or SIGKILL with ``kill``) and wait for the process to end."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop (SIGTERM) and start again on the same port with the same persistence."""
        self.stop()
        self.start()

    def __enter__(self) -> MosquittoBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AmqttBroker:
    """An in-process amqtt broker (MQTT 3.1.1) on 127.0.0.1, started and stopped on the running loop."""

    host = "127.0.0.1"

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``HOST:PORT`` as ``--broker`` takes it."""
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        """Start listening (raises :class:`BrokerError` when amqtt is not installed)."""
        try:
            broker_cls: Any = importlib.import_module("amqtt.broker").Broker
        except ImportError as exc:
            raise BrokerError(f"neither mosquitto nor amqtt is available: {exc}") from None
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }
        self._broker = broker_cls(config)
        await self._broker.start()

    async def stop(self) -> None:
        """Shut the broker down."""
        if self._broker is not None:
            with contextlib.suppress(Exception):
                await self._broker.shutdown()
            self._broker = None
