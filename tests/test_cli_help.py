"""``tablesense --help`` lists every command without importing the command modules (the
listing took most of a second because the parser imported aiohttp, aiomqtt, psycopg and rich)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tablesense.daemon import cli

HEAVY = ("aiohttp", "aiomqtt", "psycopg", "rich", "paho", "tablesense.daemon.commands.run",
         "tablesense.daemon.app")

PROBE = """
import contextlib, io, sys
from tablesense.daemon.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main({argv!r})
    except SystemExit as exc:
        code = exc.code
print(repr(code))
print(out.getvalue())
heavy = {{"aiohttp", "aiomqtt", "psycopg", "rich", "paho"}}
print("MODULES " + " ".join(sorted(m for m in sys.modules if m.split(".")[0] in heavy
      or m.startswith("tablesense.daemon.commands.") or m == "tablesense.daemon.app")))
"""


def _probe(argv: list[str]) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          timeout=60, check=True)
    text, _, mods = done.stdout.rpartition("MODULES ")
    return text, set(mods.split())


def test_help_lists_every_command_and_imports_none_of_them() -> None:
    text, modules = _probe(["--help"])
    assert text.startswith("0\n") and "usage: tablesense" in text
    for name in cli.COMMANDS:
        assert cli._command_name(name) in text
    assert not {m for m in modules if m.split(".")[0] in {"aiohttp", "aiomqtt", "psycopg", "rich", "paho"}}
    assert not {m for m in modules if m.startswith("tablesense.daemon.commands.")}
    assert "tablesense.daemon.app" not in modules


def test_version_still_works_without_the_heavy_imports() -> None:
    text, modules = _probe(["--version"])
    assert "tablesense " in text and text.startswith("0\n")
    assert not {m for m in modules if m.split(".")[0] in {"aiohttp", "aiomqtt", "psycopg", "rich"}}


@pytest.mark.parametrize("name", cli.COMMANDS)
def test_summary_is_the_line_the_command_registers(name: str) -> None:
    """The static listing cannot drift from the commands' own help."""
    parser = cli.build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert helps == {cli._command_name(name): cli.SUMMARIES[name]}


def test_a_named_command_still_gets_its_full_parser() -> None:
    parser = cli.build_parser(cli._chosen_module(["settle", "-"]), summaries=True)
    ns = parser.parse_args(["settle", "-"])
    assert callable(ns.func)
