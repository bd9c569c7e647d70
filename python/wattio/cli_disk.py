"""`wattio` subcommands of the disk area."""

from __future__ import annotations


def add_commands(sub) -> None:
    """Register this area's subcommands on the top-level subparsers."""
