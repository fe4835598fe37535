"""A click group that imports a command's module only when that command runs.

``governed-memory --help`` used to import every command module, and with them the
manager, the profile model, OpenTelemetry and asyncio: 0.2-0.3 s before printing a
list. Here the root group knows each built-in command by name, module and one-line
help (``main.COMMANDS``), lists them from that table, and imports a module when its
command is asked for. A test keeps the table's help lines equal to the commands' own.
Plugin commands are looked up after the built-ins, as before (see ``plugin_commands``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import NamedTuple

import click

from governed_memory.cli.plugin_commands import PluginCommandGroup


class LazyCommand(NamedTuple):
    """A built-in command known by name before its module is imported (a named tuple,
    not an attrs class: ``--help`` would pay for importing attrs)."""

    target: str
    """``module:attribute`` of the click command."""
    summary: str
    """Its short help, as ``--help`` lists it."""

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(PluginCommandGroup):
    def __init__(self, *args: object, lazy: Mapping[str, LazyCommand] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})

    def builtin_names(self) -> frozenset[str]:
        return frozenset(self.commands) | frozenset(self.lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.builtin_names())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.lazy.get(cmd_name)
        if entry is not None and cmd_name not in self.commands:
            self.add_command(entry.load(), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table: importing nothing."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                # click's own shortening, applied to the table's line
                stand_in = click.Command(name, help=self.lazy[name].summary)
                rows.append((name, stand_in.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
