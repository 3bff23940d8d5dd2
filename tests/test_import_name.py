"""One import name: the code imports itself only as ``tablesense.*`` (issue: a real install).

The repository keeps the design card's folders at the top (``daemon/``, ``drivers/``, ``simulators/``) and
maps them into ``tablesense`` with links (``tablesense/daemon -> ../daemon``). From the checkout the
folders are also importable under their bare names, and a module imported under both names exists twice
(two ``UsageError`` classes, two registries): this test keeps any bare import, including one in code
that tests run in a subprocess, out of the tree.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE = ("daemon", "drivers", "simulators")
_IN_TEXT = re.compile(r"(?:^|[;\n]\s*|\\n)(?:from|import) (?:daemon|drivers|simulators)\b")


def _sources() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split() if not p.startswith("tablesense/")]


def test_no_module_imports_a_bare_top_level_name() -> None:
    bad = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value[:60]] if _IN_TEXT.search(node.value) else []
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                    if n.split(".")[0] in BARE or not isinstance(node, ast.Import | ast.ImportFrom)]
    assert not bad, "import tablesense.<folder>, never the bare folder name:\n" + "\n".join(bad)


def test_the_test_run_loaded_no_bare_top_level_module() -> None:
    assert not [m for m in sys.modules if m.split(".")[0] in BARE]


def test_links_map_the_folders_into_tablesense() -> None:
    for name in BARE:
        link = ROOT / "tablesense" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link
