"""``governed-memory providers list``: what providers plugins registered and what each
declares it can do.

Each provider is built unstarted with an empty config (a factory does no I/O), so
listing opens no database and writes nothing; one that needs a config to be built is
listed with why, never stops the listing.

A provider with several backends or modes may say what each offers: its registered
factory's ``variants()`` returns one mapping per variant, ``name``, ``config`` (the
keys that select it, never a secret), ``description``, ``capabilities``
(``Capabilities``, declared, so no variant's driver is imported or server reached) and,
when this process lacks what the variant needs, ``missing`` (what to install). A
declaration this command cannot read is shown as a problem of that provider.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from governed_memory.cli.common import json_option


@click.group()
def providers() -> None:
    """Registered memory providers."""


@providers.command("list")
@json_option
def providers_list(as_json: bool) -> None:
    """Providers registered by plugins, with the capabilities they declare, and the
    backends (variants) a provider declares, each with its own.

    Each is built unstarted with an empty config (a factory does no I/O), so listing
    opens no database and writes nothing.
    """
    from governed_memory.plugins import PluginManager

    rows = [_row(registration) for registration in PluginManager.load().providers.all()]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for row in rows:
        click.echo(f"{row['name']}  (plugin {row['plugin']})  {row['description']}")
        caps = row["capabilities"]
        if caps is not None:
            click.echo(f"  capabilities: {_flags(caps)}")
            click.echo(f"  max page size: {caps['max_page_size']}")
        for variant in row["variants"]:
            needs = f"  (not installed here: {variant['missing']})" if variant["missing"] else ""
            click.echo(f"  {_selector(variant['config'])}: {variant['description']}{needs}")
            click.echo(f"    capabilities: {_compared(variant['capabilities'], caps)}")
        for problem in row["problems"]:
            click.echo(f"  problem: {problem}")


def _row(registration: Any) -> dict[str, Any]:
    from governed_memory.clock import SystemClock
    from governed_memory.converter import unstructure
    from governed_memory.errors import MemoryConfigurationError

    row: dict[str, Any] = {"name": registration.name, "plugin": registration.plugin,
                           "description": registration.description, "capabilities": None,
                           "variants": [], "problems": []}
    try:
        provider = registration.factory({}, SystemClock())
    except MemoryConfigurationError as exc:
        row["problems"].append(f"not built without a config: {exc}")
    else:
        row["capabilities"] = unstructure(provider.capabilities())
    describe = getattr(registration.factory, "variants", None)
    if callable(describe):
        try:
            row["variants"] = [_variant(item) for item in describe()]
        except (TypeError, ValueError, MemoryConfigurationError) as exc:
            row["problems"].append(f"its variants cannot be read: {exc}")
    return row


def _variant(item: object) -> dict[str, Any]:
    """One declared variant, checked: plugin code is no proof of its own shape."""
    from governed_memory.capabilities import Capabilities
    from governed_memory.converter import unstructure

    if not isinstance(item, Mapping):
        raise TypeError("a variant is a mapping")
    name, config = item.get("name"), item.get("config")
    description, caps = item.get("description", ""), item.get("capabilities")
    missing = item.get("missing")
    if not isinstance(name, str) or not name:
        raise ValueError("a variant's name is a non-empty string")
    if not isinstance(config, Mapping) or not all(isinstance(k, str) for k in config):
        raise ValueError(f"variant {name!r}: config is a mapping of keys")
    if not isinstance(description, str) or not isinstance(caps, Capabilities):
        raise ValueError(f"variant {name!r}: a description and Capabilities are required")
    if missing is not None and not isinstance(missing, str):
        raise ValueError(f"variant {name!r}: missing names what to install")
    return {"name": name, "config": json.loads(json.dumps(dict(config))),
            "description": description, "capabilities": unstructure(caps),
            "missing": missing}


def _flags(capabilities: Mapping[str, Any]) -> str:
    return ", ".join(name for name, value in capabilities.items() if value is True)


def _compared(capabilities: Mapping[str, Any], listed: Mapping[str, Any] | None) -> str:
    """A variant's flags as what differs from the provider's line above, which a reader
    has just read; in full when there is none."""
    if listed is None:
        return _flags(capabilities)
    lacks = [name for name, value in listed.items() if value is True
             and capabilities.get(name) is not True]
    adds = [name for name, value in capabilities.items() if value is True
            and listed.get(name) is not True]
    pages = capabilities.get("max_page_size")
    changes = ([f"without {', '.join(lacks)}"] if lacks else []) + (
        [f"with {', '.join(adds)}"] if adds else []) + (
        [f"max page size {pages}"] if pages != listed.get("max_page_size") else [])
    return "as above" + (", " + "; ".join(changes) if changes else "")


def _selector(config: Mapping[str, Any]) -> str:
    """``backend = "postgres"``: the profile lines that choose a variant."""
    return ", ".join(f"{key} = {json.dumps(value)}" for key, value in config.items()) or "{}"
