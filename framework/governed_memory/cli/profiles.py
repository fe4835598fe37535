"""``governed-memory profiles list|show|validate|packs``: what profiles exist, what one
says, whether one would load here, and which domain packs select which profiles.

``show`` and ``validate`` take a profile the way every command's ``--profile`` does: a
TOML file or a registered reference (:func:`governed_memory.profiles.find_profile`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from governed_memory.cli.common import EXIT_CODES, json_option
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
from governed_memory.profiles import (
    MemoryProfileSpec,
    PackRegistry,
    ProfileLoadError,
    ProfileRegistry,
    check_against_plugins,
    find_profile,
    unstructure_profile,
)


def _fail(exc: MemoryConfigurationError) -> None:
    problems = exc.problems if isinstance(exc, ProfileLoadError) else (str(exc),)
    prefix = f"{exc.source}: " if isinstance(exc, ProfileLoadError) else ""
    click.echo(f"error (configuration): {prefix}invalid profile", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    sys.exit(EXIT_CODES["configuration"])


def _catalog() -> tuple[PluginManager, ProfileRegistry]:
    try:
        plugins = PluginManager.load()
        return plugins, ProfileRegistry.from_plugins(plugins)
    except MemoryConfigurationError as exc:
        _fail(exc)
        raise  # pragma: no cover - _fail exits


def _dump(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        rows: list[tuple[str, Any]] = []
        for key, item in value.items():
            rows.extend(_flatten(item, f"{prefix}.{key}" if prefix else key))
        return rows
    return [(prefix, value)]


def _described(spec: MemoryProfileSpec) -> dict[str, Any]:
    return {"id": spec.id, "version": spec.version, "revision": spec.revision,
            "spec": unstructure_profile(spec)}


@click.group()
def profiles() -> None:
    """Versioned memory profiles and the domain packs that select them."""


@profiles.command("list")
@json_option
def profiles_list(as_json: bool) -> None:
    """Registered profiles: reference, origin, revision, and whether they can be used."""
    _, registry = _catalog()
    entries = registry.all_entries()
    if as_json:
        _dump([{"profile": e.spec.key, "plugin": e.origin, "revision": e.spec.revision,
                "usable": e.usable, "problem": e.problem, "description": e.spec.description}
               for e in entries])
        return
    for e in entries:
        status = "" if e.usable else "  (unusable here)"
        click.echo(f"{e.spec.key:<28} {e.spec.revision}  plugin {e.origin}{status}")
        if e.spec.description:
            click.echo(f"  {e.spec.description}")
        if e.problem:
            click.echo(f"  problem: {e.problem}")
    for broken in registry.broken:  # registrations that are no profile at all
        click.echo(f"broken registration: {broken}", err=True)


@profiles.command("show")
@click.argument("profile", metavar="FILE|ID[@VERSION]")
@json_option
def profiles_show(profile: str, as_json: bool) -> None:
    """Every setting of one profile: a TOML file, or a registered reference (the newest
    version when none is given)."""
    plugins, registry = _catalog()
    try:
        found = find_profile(profile, plugins, registry=registry)
    except MemoryConfigurationError as exc:
        _fail(exc)
        return
    spec = found.spec
    where = {"file": str(found.file.absolute())} if found.file is not None else {
        "plugin": found.origin}
    if as_json:
        _dump({**_described(spec), **where, "problem": found.problem})
        return
    click.echo(f"profile:  {spec.key}")
    click.echo(f"revision: {spec.revision}")
    for label, value in where.items():
        click.echo(f"{label + ':':<9} {value}")
    if found.problem:
        click.echo(f"problem:  {found.problem}")
    for path, value in _flatten(unstructure_profile(spec)):
        if path not in ("id", "version"):
            click.echo(f"  {path} = {json.dumps(value, ensure_ascii=False)}")


@profiles.command("validate")
@click.argument("profile", metavar="FILE|ID[@VERSION]")
@json_option
def profiles_validate(profile: str, as_json: bool) -> None:
    """Check a profile (a TOML file, or a registered reference): schema, contradictions,
    and that its provider, policies and event sinks are registered here and accept
    their configuration."""
    plugins, registry = _catalog()
    try:
        found = find_profile(profile, plugins, registry=registry)
        spec = found.spec
        if found.problem is not None:
            raise MemoryConfigurationError(found.problem)
        check_against_plugins(spec, plugins)
    except MemoryConfigurationError as exc:
        if as_json:
            problems = exc.problems if isinstance(exc, ProfileLoadError) else (str(exc),)
            _dump({"valid": False, "problems": list(problems)})
            sys.exit(EXIT_CODES["configuration"])
        _fail(exc)
        return
    note = None
    if (found.file is not None and spec.key in registry
            and registry.entry(spec.key).spec.revision != spec.revision):
        note = (f"differs from the registered {spec.key} "
                f"({registry.entry(spec.key).spec.revision})")
    if as_json:
        _dump({"valid": True, **_described(spec), "note": note})
        return
    click.echo(f"ok: {spec.key}  {spec.revision}")
    if note:
        click.echo(f"note: {note}")


@profiles.command("packs")
@json_option
def profiles_packs(as_json: bool) -> None:
    """Registered domain packs: which profile each use selects, and the dependency hash."""
    plugins, registry = _catalog()
    try:
        packs = PackRegistry.from_plugins(plugins)
        resolved = [packs.resolve(pack, registry) for pack in packs.all()]
    except MemoryConfigurationError as exc:
        _fail(exc)
        return
    if as_json:
        _dump([{"pack": r.pack.key, "plugin": packs.origin(r.pack),
                "description": r.pack.description, "selections": dict(r.pack.selections),
                "dependency_hash": r.dependency_hash} for r in resolved])
        return
    for r in resolved:
        click.echo(f"{r.pack.key}  {r.dependency_hash}  plugin {packs.origin(r.pack)}")
        if r.pack.description:
            click.echo(f"  {r.pack.description}")
        for use in r.pack.uses:
            click.echo(f"  {use} -> {r.pack.selections[use]}")
