"""``python -m tablesense``: the ``tablesense`` command (:func:`tablesense.daemon.cli.main`)."""

from tablesense.daemon.cli import main

raise SystemExit(main())
