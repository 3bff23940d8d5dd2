"""The floor service inside ``tablesense demo --floor``: the same code as ``tablesense floor``, on an SQLite
file in the demo's temporary directory, with the floor page on 127.0.0.1 and a free port.

:meth:`DemoFloor.settle` waits until the floor database holds every message the table published
(its audit sees no gap up to the table's last seq) and keeps the report's totals for the demo's summary.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tablesense.daemon.floor.accounting import GamingDay, build_report, money
from tablesense.daemon.floor.consumer import FloorSettings
from tablesense.daemon.floor.service import FloorOptions, FloorService

__all__ = ["DemoFloor"]


class DemoFloor:
    """``tmp``: the demo's directory (the database is ``tmp/floor.sqlite``); broker ``host``/``port``;
    ``protocol`` ``"5"`` or ``"3.1.1"`` (the in-process fallback broker: no shared subscription)."""

    def __init__(self, tmp: Path, host: str, port: int, protocol: str, prefix: str) -> None:
        self.path = tmp / "floor.sqlite"
        self.service = FloorService(
            FloorSettings(host, port, client_id="floor-demo", prefix=prefix, protocol=protocol,
                          shared=protocol == "5"),
            FloorOptions(f"sqlite:///{self.path}", http="127.0.0.1:0", gaming_day=GamingDay(6, "UTC")))
        self.page_url: str | None = None
        self.summary: list[str] = []

    async def start(self) -> None:
        """Migrate the database, subscribe, serve the page (raises as :meth:`FloorService.start`)."""
        await self.service.start()
        self.page_url = self.service.page_url

    async def settle(self, table: str, timeout: float = 20.0) -> None:
        """Wait (up to ``timeout`` s) until the floor has the table's messages through its last seq, then
        keep a one-line summary of the floor's figures."""
        db = self.service.db
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        held = 0
        while loop.time() < deadline:
            rows = await db.fetchall("SELECT MAX(through_seq), MAX(max_seq) FROM seq_tracks WHERE "
                                     "table_id = ?", (table,))
            through, top = rows[0] if rows else (None, None)
            held = int(through or 0)
            if top and held >= int(top):
                break
            await asyncio.sleep(0.2)
        report = await build_report(db, GamingDay(6, "UTC"), table=table)
        handle = sum(r.totals.handle for r in report)
        win = sum(r.totals.house_win for r in report)
        rounds = sum(r.totals.rounds for r in report)
        digits = report[0].minor_unit if report else 2
        self.summary = [f"floor: {held} messages of {table} stored in {self.path.name}, {rounds} rounds, "
                        f"handle {money(handle, digits)}, house win {money(win, digits)} "
                        f"(with --keep: tablesense floor report --database sqlite:///{self.path})"]

    async def stop(self) -> None:
        """Stop the floor service and its page."""
        await self.service.stop()
