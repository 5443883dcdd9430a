"""``python -m cortex``: the command-line interface."""

from cortex.cli import entry

entry()
