"""The floor side: a reference consumer of every table's MQTT messages (``tablesense floor``).

One module, one job:

* :mod:`.store` - the database: PostgreSQL (psycopg 3, async) in production, SQLite for the demo, the
  same SQL for both; transactions and savepoints;
* :mod:`.migrations` - the versioned schema, created and migrated by the command itself;
* :mod:`.ingest` - one table message into the floor record, exactly once (the raw message keyed by its
  ``msg_id``; a message that fails its schema goes to ``quarantine`` with the reason);
* :mod:`.tracker` - per-table ``seq`` audit: gaps, journal epoch changes and chain heads that do not
  continue raise floor alarms and ask the table for ``cmd/replay`` until the range is filled;
* :mod:`.consumer` - the MQTT v5 subscriber: persistent session, QoS 1, the broker's acknowledgement sent
  only after the transaction holding the message committed (manual acknowledgement);
* :mod:`.accounting` - table-games figures: handle, win, commission, hold, theoretical win from the exact
  analyser (:meth:`tablesense.daemon.rules.games.Game.analyze`), per gaming day, table, shoe and wager;
* :mod:`.web` - the floor page; :mod:`.service` wires them together.

docs/floor.md describes the service, docs/scale.md the architecture for a whole casino.
"""
