"""``governed-memory policies list``: the policy plugins a profile can enable."""

from __future__ import annotations

import json

import click

from governed_memory.cli.common import json_option
from governed_memory.plugins import PluginManager


@click.group()
def policies() -> None:
    """Registered policy plugins."""


@policies.command("list")
@json_option
def policies_list(as_json: bool) -> None:
    """Policies registered by plugins; a profile enables them by name, in order."""
    rows = [{"name": r.name, "plugin": r.plugin, "description": r.description}
            for r in PluginManager.load().policies.all()]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for row in rows:
        click.echo(f"{row['name']:<16} (plugin {row['plugin']})  {row['description']}")
