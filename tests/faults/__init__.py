"""Fault-injection scenarios : pytest marker ``faults``; see docs/reliability.md."""
