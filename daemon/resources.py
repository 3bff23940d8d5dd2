"""Files shipped inside the installed package (package data), found with :mod:`importlib.resources`.

Everything a command needs at run time travels in the wheel under the one import name ``tablesense``:

* ``tablesense/daemon/signage/static/`` -- the signage page (HTML, CSS, JavaScript);
* ``tablesense/deploy/`` -- the example table configs (``examples/``), the Mosquitto config templates and
  ACL (``mosquitto/``), the systemd units (``systemd/``), the udev rule (``udev/``), the Grafana dashboard
  (``grafana/``) and ``install.sh``;
* ``tablesense/schemas/`` -- the JSON Schema of every published message.

In the repository ``tablesense/deploy`` and ``tablesense/schemas`` are links to ``deploy/`` and
``docs/schemas/`` (like ``tablesense/daemon -> ../daemon``), so the same lookups work in a checkout, in
an editable install and in the installed wheel, and never depend on the current directory.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["data_path", "example_config_path"]

_ANCHOR = "tablesense"


def data_path(*parts: str) -> Path:
    """The filesystem path of ``parts`` below the installed ``tablesense`` package, e.g.
    ``data_path("deploy", "examples")``.

    Raises:
        FileNotFoundError: the file or folder is not in the package (a broken install), naming the path.
        RuntimeError: the package is not installed as plain files (e.g. imported from a zip archive);
            pip always installs wheels as files, and aiohttp's static route needs a real folder.
    """
    res = files(_ANCHOR).joinpath(*parts)
    path = Path(str(res))
    if not isinstance(res, Path):
        raise RuntimeError(f"tablesense package data {'/'.join(parts)} is not a plain file ({res!r})")
    if not path.exists():
        raise FileNotFoundError(f"tablesense package data missing: {path} (reinstall tablesense)")
    return path


def example_config_path(game: str) -> Path:
    """The example table config of ``game`` (``baccarat``, ``ez-baccarat``, ``blackjack``, ``uth``).

    Raises:
        FileNotFoundError: no example for that game.
    """
    return data_path("deploy", "examples", f"{game}.toml")
