"""The ``cortex`` command: a thin shell over the public API.

``main(argv)`` parses, runs one small function per command and returns the exit code: 0 ok,
1 a cortex error (one line on stderr), 2 a usage error, 70 an internal error (a bug in cortex,
so scripts can tell it from a problem with their input). Every command takes ``--json``; the
store comes from ``--store`` or ``CORTEX_STORE``, the acting name from ``--actor`` or
``CORTEX_ACTOR``. A new command is one ``@command`` function (its docstring is its help).
"""

from cortex.cli.app import entry as entry
from cortex.cli.app import main as main
from cortex.cli.common import EXIT_INTERNAL as EXIT_INTERNAL
