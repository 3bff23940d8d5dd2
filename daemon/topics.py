"""MQTT topic-level validation shared by the config (``mqtt.topic_prefix``, ``table``) and the
subscriber commands (``monitor``/``signage`` ``--prefix``/``--table``), so all of them accept and refuse
the same values.

The rules are the MQTT topic-name rules (MQTT 5.0 §4.7, 3.1.1 §4.7): UTF-8, no U+0000, no wildcard
(``+``, ``#``) in a topic we publish to, at most 65535 bytes; plus ours: no control character
(U+0001-U+001F, U+007F-U+009F: the spec says they SHOULD NOT appear and brokers differ), no empty level
(no leading, trailing or doubled ``/``), no leading ``$`` (reserved for broker topics such as
``$SYS``: a ``#`` subscription does not see them), and at most :data:`MAX_PREFIX_BYTES`. A table id is
one level of 1-64 letters, digits, ``_``, ``-`` or ``.``.
"""

from __future__ import annotations

import re

__all__ = ["MAX_PREFIX_BYTES", "TABLE_ID", "option_problem", "prefix_problem", "table_problem"]

MAX_PREFIX_BYTES = 1024
"""A topic prefix longer than this (UTF-8 bytes) is refused (the whole topic must stay < 65536)."""

TABLE_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""Table, seat, spot and device ids: safe inside an MQTT topic level (no ``/``, ``+``, ``#``)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def prefix_problem(prefix: str) -> str | None:
    """What is wrong with ``prefix`` as the topic prefix (one line), or ``None`` when it is usable.

    Implements MQTT 5.0 §4.7.3 / 3.1.1 §4.7.3 (topic names) plus the stricter rules in the module
    docstring.
    """
    if not prefix:
        return "is empty"
    if len(prefix.encode("utf-8", "surrogatepass")) > MAX_PREFIX_BYTES:
        return f"is longer than {MAX_PREFIX_BYTES} bytes"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in prefix):
        return "is not valid UTF-8 (a lone surrogate)"
    if _CONTROL.search(prefix):
        return "holds a NUL or control character"
    if "+" in prefix or "#" in prefix:
        return "holds an MQTT wildcard ('+' or '#')"
    if prefix.startswith("$"):
        return "starts with '$' (reserved for broker topics such as $SYS)"
    if "" in prefix.split("/"):
        return "has an empty topic level (a leading, trailing or doubled '/')"
    return None


def table_problem(table: str) -> str | None:
    """What is wrong with ``table`` as a table id (one topic level), or ``None`` when it is usable."""
    if TABLE_ID.fullmatch(table):
        return None
    return "must be 1-64 letters, digits, '_', '-' or '.' (it is a topic level)"


def option_problem(table: str | None, prefix: str) -> str | None:
    """One line naming ``--table`` or ``--prefix`` and what is wrong with it, or ``None`` when both are
    usable (``table`` ``None``: every table). Shared by ``monitor`` and ``signage`` so they accept the
    same values the table config does."""
    if table is not None and (problem := table_problem(table)) is not None:
        return f"--table {table[:70]!r} {problem}"
    if (problem := prefix_problem(prefix)) is not None:
        return f"--prefix {prefix[:70]!r} {problem}"
    return None
