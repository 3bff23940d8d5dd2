"""How a bad table config is reported: every problem at once, each naming the file, the line where it is
known, and the key.

:class:`ConfigError` carries a tuple of :class:`ConfigIssue`. ``str(error)`` stays ONE line (the first
problem, plus how many more there are), which is what ``tablesense run`` prints before refusing to start;
``tablesense check-config`` prints :meth:`ConfigError.lines`, one line per problem::

    /etc/tablesense/bac-01.toml:14: spots.7: mapped twice (also spots.3)
    /etc/tablesense/bac-01.toml:31: wagers.tie.max: 10 is below min 500
    /etc/tablesense/bac-01.toml: missing key: seats

Without a file name (a config given as text) the line goes at the end: ``spots.7: mapped twice (also
spots.3) (at line 14)``. A TOML syntax error names line and column: ``bac-01.toml:3:9: invalid TOML:
Invalid value``.

:func:`key_lines` finds the line of every key in the TOML text (tables, dotted and quoted keys, inline
tables, multi-line arrays and strings), since :mod:`tomllib` keeps no positions; a key that is missing
from the file has no line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

__all__ = ["ConfigError", "ConfigIssue", "IssueCollector", "key_lines", "line_of"]


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem: ``message`` (one line, normally ``"<key>: <what is wrong>"``), the dotted ``key`` it is
    about (``spots.7``, ``seats[1]``; ``None`` for the whole file), and where: ``line`` and ``column``
    (1-based) when known."""

    message: str
    key: str | None = None
    line: int | None = None
    column: int | None = None

    def format(self, file: str | None = None) -> str:
        """``FILE:LINE[:COLUMN]: message`` (``FILE: message`` without a line); without a file name:
        ``message (at line LINE[, column COLUMN])``."""
        if file is not None:
            where = file if self.line is None else f"{file}:{self.line}"
            if self.line is not None and self.column is not None:
                where += f":{self.column}"
            return f"{where}: {self.message}"
        if self.line is None:
            return self.message
        col = f", column {self.column}" if self.column is not None else ""
        return f"{self.message} (at line {self.line}{col})"


class ConfigError(ValueError):
    """The configuration is not usable.

    ``ConfigError("one line")`` or ``ConfigError([ConfigIssue, ...], file=path)``. ``issues`` holds every
    problem found, ``file`` the config file when there is one. ``str()`` is one line (the first problem,
    and the count of the others); :meth:`lines` gives all of them.
    """

    def __init__(self, issues: str | Iterable[ConfigIssue], *, file: str | None = None) -> None:
        self.issues: tuple[ConfigIssue, ...] = (
            (ConfigIssue(issues),) if isinstance(issues, str) else tuple(issues))
        if not self.issues:
            raise ValueError("ConfigError needs at least one issue")
        self.file = file
        super().__init__(self._summary())

    def _summary(self) -> str:
        first = self.issues[0].format(self.file)
        more = len(self.issues) - 1
        if more:
            s = "s" if more > 1 else ""
            first += f" (and {more} more problem{s}: tablesense check-config lists them)"
        return first

    def lines(self) -> list[str]:
        """One line per problem, in the order found."""
        return [i.format(self.file) for i in self.issues]

    def with_file(self, file: str) -> ConfigError:
        """The same problems, reported against ``file``."""
        return ConfigError(self.issues, file=file)

    def located(self, text: str) -> ConfigError:
        """The same problems with the line of each key filled in from the TOML ``text``."""
        lines = key_lines(text)
        return ConfigError([i if i.line is not None or i.key is None
                            else replace(i, line=line_of(lines, i.key)) for i in self.issues], file=self.file)


class IssueCollector:
    """Collects the problems of independent checks: each ``with collector.check():`` block that raises
    :class:`ConfigError` adds its issues and the next block runs; :meth:`raise_if_any` raises them all."""

    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []

    @contextmanager
    def check(self) -> Iterator[None]:
        """Run a block; a :class:`ConfigError` it raises is recorded, not propagated."""
        try:
            yield
        except ConfigError as exc:
            self.issues.extend(exc.issues)

    def raise_if_any(self) -> None:
        """Raise one :class:`ConfigError` with every problem recorded so far (none: return)."""
        if self.issues:
            raise ConfigError(self.issues)


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _split_key(text: str) -> list[str] | None:
    """``a."b.c".d`` -> ``["a", "b.c", "d"]`` (TOML keys: bare, "basic" or 'literal'); ``None`` if not a
    key."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return None
        if text[i] in "\"'":
            quote = text[i]
            j = i + 1
            buf = []
            while j < n and text[j] != quote:
                if quote == '"' and text[j] == "\\" and j + 1 < n:
                    buf.append(text[j + 1])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            if j >= n:
                return None
            parts.append("".join(buf))
            i = j + 1
        else:
            m = _BARE.match(text, i)
            if m is None:
                return None
            parts.append(m.group())
            i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return parts
        if text[i] != ".":
            return None
        i += 1


def _scan_value(text: str, depth: int,
                in_string: str | None) -> tuple[int, str | None, list[tuple[str, int]]]:
    """Follow brackets and strings through ``text`` (part of a value); returns the bracket depth and open
    multi-line string after it, and the ``(key, depth)`` pairs of inline-table keys met on the way."""
    keys: list[tuple[str, int]] = []
    i, n = 0, len(text)
    expect_key = False
    while i < n:
        if in_string is not None:
            end = text.find(in_string, i)
            if end < 0:
                return depth, in_string, keys
            i = end + len(in_string)
            in_string = None
            continue
        c = text[i]
        if c == "#":
            break
        if text.startswith('"""', i) or text.startswith("'''", i):
            in_string = text[i:i + 3]
            i += 3
            continue
        if c in "\"'":
            end = i + 1
            while end < n and text[end] != c:
                end += 2 if c == '"' and text[end] == "\\" else 1
            if expect_key:
                m = re.match(r"\s*=", text[end + 1:])
                if m:
                    keys.append((text[i + 1:end], depth))
            expect_key = False
            i = end + 1
            continue
        if c in "[{":
            depth += 1
            expect_key = c == "{"
        elif c in "]}":
            depth -= 1
        elif c == ",":
            expect_key = True
        elif expect_key and not c.isspace():
            m = _BARE.match(text, i)
            if m and re.match(r"\s*=", text[m.end():]):
                keys.append((m.group(), depth))
                i = m.end()
                expect_key = False
                continue
            expect_key = False
        i += 1
    return depth, in_string, keys


def key_lines(text: str) -> dict[str, int]:
    """``{dotted key: 1-based line}`` for every table header and key in the TOML ``text``, including the
    keys of inline tables at their first level (``spots.1PP.seat``). Best effort: a text that is not valid
    TOML gives what could be read."""
    out: dict[str, int] = {}
    table: list[str] = []
    depth, in_string = 0, None
    for no, raw in enumerate(text.splitlines(), start=1):
        if depth > 0 or in_string is not None:  # inside a multi-line array, inline table or string
            depth, in_string, _ = _scan_value(raw, depth, in_string)
            continue
        line = raw.strip()
        if line.startswith("["):
            body = re.sub(r"\s*#.*$", "", line).strip("[]")
            parts = _split_key(body)
            if parts is not None:
                table = parts
                out.setdefault(".".join(table), no)
            continue
        key_text, eq, value = _split_assignment(line)
        parts = _split_key(key_text) if eq else None
        if parts is None:
            continue
        path = [*table, *parts]
        out.setdefault(".".join(path), no)
        depth, in_string, inner = _scan_value(value, 0, None)
        for key, level in inner:
            if level == 1:
                out.setdefault(".".join([*path, key]), no)
    return out


def _split_assignment(line: str) -> tuple[str, bool, str]:
    """``key = value`` -> ``(key, True, value)``, the ``=`` found outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "=":
            return line[:i], True, line[i + 1:]
    return line, False, ""


_INDEX = re.compile(r"\[\d+\]$")


def line_of(lines: dict[str, int], key: str) -> int | None:
    """The line of ``key`` (``spots.7.seat``, ``seats[1]``) or of its nearest enclosing key that is in the
    file; ``None`` when neither is (e.g. a key that is missing)."""
    parts = _INDEX.sub("", key).split(".")
    while parts:
        found = lines.get(".".join(parts))
        if found is not None:
            return found
        parts.pop()
    return None
