"""One floor process: database (migrated at start), MQTT consumer, seq audit and, optionally, the page.

:class:`FloorService` is what ``tablesense floor`` and ``tablesense demo --floor`` run: :meth:`start`
opens and migrates the database, then starts the consumer (:mod:`.consumer`), the audit loop
(:mod:`.tracker`, every ``audit_interval`` seconds; only the leading process of several requests
replays) and the floor page (:mod:`.web`) when ``http`` is given; :meth:`stop` ends them (the batch in
progress is committed and acknowledged first).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from tablesense.daemon.floor.accounting import GamingDay
from tablesense.daemon.floor.consumer import FloorConsumer, FloorSettings
from tablesense.daemon.floor.migrations import migrate
from tablesense.daemon.floor.store import Database, DatabaseError, open_database
from tablesense.daemon.floor.tracker import Tracker
from tablesense.daemon.logging import get_logger
from tablesense.drivers.waits import cancel_and_wait, wait_at_most

__all__ = ["FloorOptions", "FloorService"]

log = get_logger(component="floor")


@dataclass(frozen=True, slots=True)
class FloorOptions:
    """``database``: URL (:func:`.store.open_database`); ``http``: ``HOST:PORT`` of the floor page or
    ``None``; ``gaming_day``: the casino's gaming day; ``grace``/``retry``: the audit's seconds."""

    database: str
    http: str | None = None
    gaming_day: GamingDay = field(default_factory=GamingDay)
    audit_interval: float = 1.0
    grace: float = 2.0
    retry: float = 10.0


class FloorService:
    """The floor process (module docstring). ``page_url`` is set once the page listens."""

    def __init__(self, settings: FloorSettings, options: FloorOptions) -> None:
        self.settings = settings
        self.options = options
        self.db: Database = open_database(options.database)
        self._audit_db: Database = open_database(options.database)
        self.tracker = Tracker(self._audit_db, None, settings.client_id, grace=options.grace,
                               retry=options.retry)
        self.consumer = FloorConsumer(settings, self.db, tracker=self.tracker)
        self.tracker.send = self.consumer.send_replay
        self.page_url: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_page: object = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        """Open and migrate the database, start consuming, auditing and (with ``http``) the page.

        Raises:
            DatabaseError: the database cannot be reached or migrated (one line).
            migrations.SchemaTooNew: the database is newer than this software.
            OSError: the page's address cannot be bound.
        """
        applied = await migrate(self.db)
        if applied:
            log.info("floor_schema_migrated", versions=applied)
        self._tasks.append(asyncio.create_task(self.consumer.run(), name="floor-consumer"))
        self._tasks.append(asyncio.create_task(self._audit_loop(), name="floor-audit"))
        if self.options.http is not None:
            from tablesense.daemon.floor.web import start_floor_page

            self.page_url, self._stop_page = await start_floor_page(
                self.options.database, self.options.http, self.options.gaming_day, self.settings.prefix)

    async def _audit_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.tracker.audit()
            except DatabaseError as exc:
                log.error("floor_audit_failed", error=str(exc))
            except Exception as exc:  # the audit must never take the floor down
                log.critical("floor_audit_crashed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await wait_at_most(self._stopping.wait(), self.options.audit_interval)

    async def stop(self) -> None:
        """Stop everything and close the database connections."""
        self._stopping.set()
        await self.consumer.stop()
        for t in self._tasks:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await wait_at_most(asyncio.shield(t), 10)
        stuck = await cancel_and_wait(self._tasks)  # cancelled again if a library swallowed it
        if stuck:
            log.error("floor_tasks_stuck", tasks=sorted(t.get_name() for t in stuck),
                      message="task(s) did not end within 10 s of being cancelled; left behind")
        await asyncio.gather(*(t for t in self._tasks if t not in stuck), return_exceptions=True)
        if self._stop_page is not None:
            await self._stop_page()  # type: ignore[operator]
        await self.db.close()
        await self._audit_db.close()
