"""``tablesense schemas [--out DIR] [--check]``: write the JSON Schema of every published message.

One file per message model of :mod:`daemon.messages` (the single definition of every payload),
named after its ``schema`` tag, e.g. ``docs/schemas/tablesense.settlement.json``, generated with
``msgspec.json.schema`` (JSON Schema 2020-12). ``--check`` writes nothing and exits 1 naming the files
that differ from the models (the test suite runs the same check, so committed schemas cannot drift).

The default directory is the schemas shipped with the package (:func:`daemon.resources.data_path`):
``docs/schemas/`` in a checkout (``tablesense/schemas`` links to it), the installed copies otherwise, so
``tablesense schemas --check`` run anywhere checks that the installed schemas match the installed code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import msgspec

from tablesense.daemon.cli import UsageError
from tablesense.daemon.messages import message_types
from tablesense.daemon.resources import data_path

__all__ = ["DEFAULT_DIR", "drift", "register", "render_schemas", "run"]

DEFAULT_DIR = data_path("schemas")
"""The packaged schemas: docs/schemas/ of the source tree (through the link tablesense/schemas)."""


def render_schemas() -> dict[str, str]:
    """``{file name: JSON text}`` for every message model (stable: sorted keys, 2-space indent, final
    newline). The file name is the model's ``schema`` tag plus ``.json``."""
    out: dict[str, str] = {}
    for cls in message_types():
        tag = cls.__struct_config__.tag
        schema: dict[str, Any] = msgspec.json.schema(cls)
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": str(tag), **schema}
        out[f"{tag}.json"] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def drift(directory: Path) -> list[str]:
    """Names of schema files in ``directory`` that are missing, different, or no longer generated."""
    wanted = render_schemas()
    bad = [name for name, text in sorted(wanted.items())
           if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
    if directory.is_dir():
        bad += sorted(p.name for p in directory.glob("*.json") if p.name not in wanted)
    return bad


def run(args: argparse.Namespace) -> int:
    """Write (or with ``--check`` compare) the schema files; returns the exit status."""
    directory = Path(args.out)
    if args.check:
        bad = drift(directory)
        if bad:
            print(f"schemas out of date in {directory}: {', '.join(bad)} (run: tablesense schemas)")
            return 1
        print(f"schemas in {directory} match the message models")
        return 0
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.json"):
            if stale.name not in render_schemas():
                stale.unlink()
        for name, text in render_schemas().items():
            (directory / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write schemas to {directory}: {exc.strerror or exc}") from None
    print(f"wrote {len(render_schemas())} schemas to {directory}")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``schemas`` sub-command."""
    p = subparsers.add_parser("schemas", help="generate docs/schemas/*.json from the message models",
                              description="Write the JSON Schema of every published message, one file per "
                                          "message model; --check compares only.")
    p.add_argument("--out", default=str(DEFAULT_DIR),
                   help="directory (default: the packaged schemas, docs/schemas/ in a checkout)")
    p.add_argument("--check", action="store_true", help="compare only; exit 1 when the files differ")
    p.set_defaults(func=run)
