"""Terminal output of the one-shot commands (``recall``, ``analyze``, ``floor report``): a rich console
that behaves like a shell tool when its reader goes away.

rich's default reaction to a closed pipe (``tablesense recall | head``) is to redirect stdout and exit
with status 1, which scripts read as a failure. :class:`PipeConsole` hands the ``BrokenPipeError`` on to
:func:`daemon.cli.main`, which ends the command quietly with 141 (128 + SIGPIPE), as a shell reports for
other tools (Python docs, ``signal`` module, "Note on SIGPIPE").
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["PipeConsole"]


class PipeConsole(Console):
    """A :class:`rich.console.Console` whose closed-pipe handling is the command line's: a reader that went
    away raises :class:`BrokenPipeError` (caught by :func:`daemon.cli.main`: exit 141, nothing on
    stderr) instead of rich's ``SystemExit(1)``. Takes the same arguments as ``Console``."""

    def on_broken_pipe(self) -> None:
        """Called by rich when writing the buffer hit a closed pipe; raises ``BrokenPipeError``."""
        self.quiet = True
        raise BrokenPipeError("the reader of standard output went away")
