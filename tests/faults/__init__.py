"""Fault-injection scenarios (issue 5): pytest marker ``faults``; see docs/reliability.md."""
