"""cli: re-exports."""

from langmem_layer.cli.main import COMMANDS, Command, main

__all__ = [
    "COMMANDS",
    "Command",
    "main",
]
