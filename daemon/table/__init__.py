"""The table's round state machine: pure, event-driven, deterministic (docs/state-machine.md).

Device events and operator commands go in as :class:`~daemon.table.inputs.TimedInput`; what to publish
comes out as :class:`~daemon.table.inputs.Emit`. No I/O, no clock: the timestamp of every input is given
by the caller (the journal), so replaying the same inputs gives the same state and the same emits.
The machine itself is :class:`daemon.table.machine.TableMachine`.
"""

from tablesense.daemon.table.inputs import Channel, Command, CommandReply, Emit, TimedInput
from tablesense.daemon.table.machine import Phase, TableMachine, replay

__all__ = ["Channel", "Command", "CommandReply", "Emit", "Phase", "TableMachine", "TimedInput", "replay"]
