"""Fixtures of the fault-injection suite. ``rigs`` (a scenario's world: broker, optional proxy, subscriber,
simulated table, ``tablesense run``) is in tests/conftest.py, shared with the adversarial tests; see
:mod:`faults.harness`."""
