"""tablesense: the live table-sensor daemon for casino table games.

The one top-level import name of the installed package. In the repository the design card's folders stay
at the top (``daemon/``, ``drivers/``, ``simulators/``); this folder maps them into the ``tablesense``
namespace with symbolic links (``tablesense/daemon -> ../daemon``, ...), which the wheel build follows, so
the installed wheel holds ``tablesense.daemon``, ``tablesense.drivers`` and ``tablesense.simulators`` and
nothing else at the top level (docs/install.md).
"""
