"""Subcommands that plugins add to ``governed-memory`` (``register_cli_commands``).

Loading plugins and running their ``register_cli_commands`` hooks imports their
command modules, which ``governed-memory add`` and ``--help`` have no use for. So the
group loads them only when it is asked for a name it does not build in, and
``governed-memory commands`` lists what plugins add. A plugin command may not take a
built-in's name: that is refused when plugin commands load, never resolved silently
either way.
"""

from __future__ import annotations

import click

from governed_memory.cli.exit_codes import EXIT_CODES
from governed_memory.errors import MemoryConfigurationError

CONFIGURATION_EXIT = EXIT_CODES["configuration"]


class PluginCommandError(click.ClickException):
    """A plugin command that cannot be added (a clash, not a ``click.Command``)."""

    exit_code = CONFIGURATION_EXIT

    def format_message(self) -> str:
        return f"(configuration) {self.message}"


def load_plugin_commands(builtin: frozenset[str]) -> dict[str, click.Command]:
    """The commands plugins register, by name, checked against the built-in names."""
    from governed_memory.plugins import PluginManager

    try:
        plugins = PluginManager.load()
    except MemoryConfigurationError as exc:
        raise PluginCommandError(str(exc)) from None
    found: dict[str, click.Command] = {}
    for entry in plugins.cli_commands.all():
        if entry.name in builtin:
            raise PluginCommandError(
                f"plugin {entry.plugin!r} registers the CLI command {entry.name!r}, "
                "which is a built-in command")
        if not isinstance(entry.factory, click.Command):
            raise PluginCommandError(
                f"plugin {entry.plugin!r}: CLI command {entry.name!r} is not a click command")
        command = entry.factory
        if entry.description and not command.short_help:
            command.short_help = entry.description
        found[entry.name] = command
    return found


class PluginCommandGroup(click.Group):
    """A click group whose unknown names are looked up among plugin commands."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._plugin_commands: dict[str, click.Command] | None = None

    def builtin_names(self) -> frozenset[str]:
        """The names a plugin command may not take."""
        return frozenset(self.commands)

    def plugin_commands(self) -> dict[str, click.Command]:
        """Loaded once per process, on first need."""
        if self._plugin_commands is None:
            self._plugin_commands = load_plugin_commands(self.builtin_names())
        return self._plugin_commands

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        builtin = super().get_command(ctx, cmd_name)
        if builtin is not None:
            return builtin
        return self.plugin_commands().get(cmd_name)


@click.command("commands")
@click.pass_context
def commands(ctx: click.Context) -> None:
    """The commands plugins add (loads every plugin, which --help does not)."""
    group = ctx.parent.command if ctx.parent is not None else None
    if not isinstance(group, PluginCommandGroup):
        raise click.UsageError("not run under the governed-memory command")
    found = group.plugin_commands()
    if not found:
        click.echo("no plugin adds a command")
    for name in sorted(found):
        command = found[name]
        click.echo(f"{name}  {command.get_short_help_str(limit=70)}")
