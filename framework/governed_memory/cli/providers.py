"""``governed-memory providers list``: what providers plugins registered and what each
declares it can do."""

from __future__ import annotations

import json

import click

from governed_memory.cli.common import json_option


@click.group()
def providers() -> None:
    """Registered memory providers."""


@providers.command("list")
@json_option
def providers_list(as_json: bool) -> None:
    """Providers registered by plugins, with the capabilities they declare.

    Each is built unstarted with an empty config (a factory does no I/O), so listing
    opens no database and writes nothing.
    """
    from governed_memory.clock import SystemClock
    from governed_memory.converter import unstructure
    from governed_memory.plugins import PluginManager

    rows = []
    for registration in PluginManager.load().providers.all():
        provider = registration.factory({}, SystemClock())
        rows.append({"name": registration.name, "plugin": registration.plugin,
                     "description": registration.description,
                     "capabilities": unstructure(provider.capabilities())})
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for row in rows:
        caps = row["capabilities"]
        flags = [name for name, value in caps.items() if value is True]
        click.echo(f"{row['name']}  (plugin {row['plugin']})  {row['description']}")
        click.echo(f"  capabilities: {', '.join(flags)}")
        click.echo(f"  max page size: {caps['max_page_size']}")
