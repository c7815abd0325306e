"""The ``langmem-layer`` command (``main``: the table of commands)."""

from langmem_layer.cli.main import COMMANDS, Command, main

__all__ = [
    "COMMANDS",
    "Command",
    "main",
]
