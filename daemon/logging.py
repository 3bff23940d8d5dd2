"""Structured logging for the daemon: structlog, one JSON object per line on stdout.

Every line carries ``timestamp`` (ISO 8601, UTC), ``level``, ``event`` and whatever context is bound
with :func:`bind_table` / :func:`bind_round` (``table``, ``shoe``, ``round``) through
``structlog.contextvars`` (so asyncio tasks inherit it; PEP 567). Under systemd (``$JOURNAL_STREAM``
set) each line starts with a syslog priority prefix ``<N>`` so journald stores real priorities
(systemd.exec(5) ``SyslogLevelPrefix=``, sd-daemon(3)). Third-party stdlib loggers (aiomqtt's
``mqtt``, paho) are rendered as the same JSON lines.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import msgspec
import structlog

__all__ = ["bind_round", "bind_table", "configure", "get_logger"]

_PRIORITY = {"critical": 2, "error": 3, "warning": 4, "info": 6, "debug": 7}
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL}
_encoder = msgspec.json.Encoder(enc_hook=str)


class _JsonLine:
    """Final processor: render the event dict as one JSON line, optionally with a ``<N>`` prefix."""

    def __init__(self, priority_prefix: bool) -> None:
        self._prefix = priority_prefix

    def __call__(self, logger: Any, name: str, event_dict: MutableMapping[str, Any]) -> str:
        line = _encoder.encode(dict(event_dict)).decode()
        if self._prefix:
            level = str(event_dict.get("level", "info"))
            return f"<{_PRIORITY.get(level, 6)}>{line}"
        return line


def configure(level: str = "info", stream: TextIO | None = None, priority_prefix: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger for JSON lines.

    ``level``: one of debug, info, warning, error, critical (unknown names mean info). ``stream``:
    where lines go (default stdout). ``priority_prefix``: add journald's ``<N>`` prefix; default: only
    when ``$JOURNAL_STREAM`` says stdout is the journal. Safe to call more than once.
    """
    out = stream if stream is not None else sys.stdout
    if priority_prefix is None:
        priority_prefix = bool(os.environ.get("JOURNAL_STREAM"))
    numeric = _LEVELS.get(level.lower(), logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, _JsonLine(priority_prefix)],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, _JsonLine(priority_prefix)],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # aiomqtt/paho are chatty at INFO/DEBUG (every packet); warnings and errors are what matters.
    root.setLevel(max(numeric, logging.WARNING))


def get_logger(**initial: Any) -> Any:
    """A structlog bound logger (``log.info("event", key=value)`` -> one JSON line)."""
    return structlog.get_logger(**initial)


def bind_table(table: str) -> None:
    """Bind ``table`` to every later log line of this context (and of tasks created from it)."""
    structlog.contextvars.bind_contextvars(table=table)


def bind_round(shoe: int | str | None, round_no: int | str | None) -> None:
    """Bind the current ``shoe`` and ``round`` numbers to later log lines of this context."""
    structlog.contextvars.bind_contextvars(shoe=shoe, round=round_no)
