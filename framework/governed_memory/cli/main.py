"""The ``governed-memory`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import click

from governed_memory import __version__
from governed_memory.cli import format as fmt
from governed_memory.cli.audit import audit
from governed_memory.cli.common import (
    db_option,
    emit,
    json_option,
    operator,
    parse_metadata,
    run_with_manager,
    scope_from,
    scope_options,
)
from governed_memory.cli.conformance import conformance
from governed_memory.cli.demo import demo
from governed_memory.cli.indexing import COMMANDS as INDEXING_COMMANDS
from governed_memory.cli.plugin_commands import PluginCommandGroup, commands
from governed_memory.cli.policies import policies
from governed_memory.cli.profiles import profiles
from governed_memory.cli.review import approve, reject, review
from governed_memory.converter import unstructure
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.records import ErasureReceipt, MemoryType

TYPES = click.Choice([t.value for t in MemoryType])


@click.group(cls=PluginCommandGroup,
             epilog="Plugins add more commands (the service extra: serve, keys, mcp).\n\n"
                    "`governed-memory commands` lists them.")
@click.version_option(__version__, prog_name="governed-memory")
def cli() -> None:
    """Scoped, governed memory for LLM chat and agents."""


cli.add_command(demo)
for _command in (profiles, policies, approve, reject, review, *INDEXING_COMMANDS):
    cli.add_command(_command)
cli.add_command(conformance)
cli.add_command(audit)
cli.add_command(commands)


@cli.group()
def providers() -> None:
    """Registered memory providers."""


@providers.command("list")
@json_option
def providers_list(as_json: bool) -> None:
    """Providers registered by plugins, with the capabilities they declare."""
    from governed_memory.clock import SystemClock

    manager = PluginManager.load()
    rows = []
    for registration in manager.providers.all():
        provider = registration.factory({}, SystemClock())
        rows.append({"name": registration.name, "plugin": registration.plugin,
                     "description": registration.description,
                     "capabilities": unstructure(provider.capabilities())})
    if as_json:
        import json

        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for row in rows:
        caps = row["capabilities"]
        flags = [name for name, value in caps.items() if value is True]
        click.echo(f"{row['name']}  (plugin {row['plugin']})  {row['description']}")
        click.echo(f"  capabilities: {', '.join(flags)}")
        click.echo(f"  max page size: {caps['max_page_size']}")


@cli.command()
@db_option
@scope_options
@click.argument("content")
@click.option("--type", "memory_type", type=TYPES, default="note", show_default=True)
@click.option("--key", default=None, help="unique key within the scope")
@click.option("--metadata", default=None, help="JSON object")
@click.option("--importance", type=float, default=0.5, show_default=True)
@click.option("--ttl", type=float, default=None, help="seconds until the memory expires")
@click.option("--idempotency-key", default=None)
@click.option("--source-type", default=None,
              help="where it came from (provenance: web, tool, conversation, ...)")
@click.option("--source-id", default=None, help="the source's own id (a URL, a turn id)")
@json_option
def add(db: Path | None, content: str, memory_type: str, key: str | None,
        metadata: str | None, importance: float, ttl: float | None,
        idempotency_key: str | None, source_type: str | None, source_id: str | None,
        as_json: bool, **scope_kw: Any) -> None:
    """Write a memory."""
    scope = scope_from(scope_kw)
    meta = parse_metadata(metadata)
    provenance = {name: value for name, value in (("source_type", source_type),
                                                  ("source_id", source_id)) if value}

    async def work(m: GovernedMemoryManager) -> Any:
        expires = None if ttl is None else m.clock.now() + ttl
        return await m.add(operator(scope.tenant_id), scope, content, memory_type=memory_type,
                           key=key, metadata=meta, importance=importance, expires_at=expires,
                           idempotency_key=idempotency_key, provenance=provenance)

    emit(run_with_manager(db, work), as_json, fmt.record_text)


@cli.command()
@db_option
@scope_options
@click.argument("record_id", required=False)
@click.option("--key", default=None, help="look up by key instead of id")
@json_option
def get(db: Path | None, record_id: str | None, key: str | None, as_json: bool,
        **scope_kw: Any) -> None:
    """Read one memory by id or key."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.get(operator(scope.tenant_id), scope, record_id,
                                                  key=key))
    emit(result, as_json, fmt.record_text)


@cli.command("list")
@db_option
@scope_options
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--cursor", default=None)
@click.option("--type", "memory_types", type=TYPES, multiple=True)
@json_option
def list_(db: Path | None, limit: int, cursor: str | None, memory_types: tuple[str, ...],
          as_json: bool, **scope_kw: Any) -> None:
    """Page through the memories of one exact scope, oldest first."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.list(operator(scope.tenant_id), scope, limit=limit,
                                                   cursor=cursor, memory_types=memory_types))
    emit(result, as_json, fmt.page_text)


@cli.command()
@db_option
@scope_options
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--type", "memory_types", type=TYPES, multiple=True)
@json_option
def search(db: Path | None, query: str, limit: int, memory_types: tuple[str, ...],
           as_json: bool, **scope_kw: Any) -> None:
    """Search the memories of one exact scope."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.search(operator(scope.tenant_id), scope, query,
                                                     limit=limit, memory_types=memory_types))
    emit(result, as_json, fmt.search_text)


@cli.command()
@db_option
@scope_options
@click.argument("record_id")
@click.option("--expected-revision", default=None, help="refuse if the record has moved on")
@click.option("--content", default=None)
@click.option("--type", "memory_type", type=TYPES, default=None)
@click.option("--metadata", default=None, help="JSON object (replaces the metadata)")
@click.option("--importance", type=float, default=None)
@click.option("--idempotency-key", default=None)
@json_option
def update(db: Path | None, record_id: str, expected_revision: str | None, content: str | None,
           memory_type: str | None, metadata: str | None, importance: float | None,
           idempotency_key: str | None, as_json: bool, **scope_kw: Any) -> None:
    """Change a memory (compare-and-set with --expected-revision)."""
    scope = scope_from(scope_kw)
    meta = parse_metadata(metadata)
    result = run_with_manager(db, lambda m: m.update(
        operator(scope.tenant_id), scope, record_id, expected_revision=expected_revision,
        content=content, memory_type=memory_type, metadata=meta, importance=importance,
        idempotency_key=idempotency_key))
    emit(result, as_json, fmt.record_text)


@cli.command()
@db_option
@scope_options
@click.argument("record_id")
@click.option("--expected-revision", default=None)
@click.option("--hard", is_flag=True, help="remove the record and its history physically")
@click.option("--idempotency-key", default=None)
@json_option
def delete(db: Path | None, record_id: str, expected_revision: str | None, hard: bool,
           idempotency_key: str | None, as_json: bool, **scope_kw: Any) -> None:
    """Delete a memory (soft: a tombstone version; --hard: gone with its history)."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.delete(
        operator(scope.tenant_id), scope, record_id, expected_revision=expected_revision,
        hard=hard, idempotency_key=idempotency_key))
    emit(result, as_json, lambda r: f"deleted {r.record_id} ({'hard' if r.hard else 'soft'}"
                                    + (f", tombstone v{r.version}" if r.version else "") + ")")


@cli.command()
@db_option
@scope_options
@click.argument("record_id")
@json_option
def history(db: Path | None, record_id: str, as_json: bool, **scope_kw: Any) -> None:
    """Every version of a memory, oldest first."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.history(operator(scope.tenant_id), scope,
                                                      record_id))
    emit(list(result), as_json, fmt.history_text)


def _receipt_text(receipt: ErasureReceipt) -> str:
    counts = ", ".join(f"{name} {count}" for name, count in sorted(receipt.counts.items()))
    return (f"erased user {receipt.user_id} of tenant {receipt.tenant_id}: {counts}\n"
            f"receipt {receipt.receipt_hash} (request {receipt.request_id}, "
            f"{len(receipt.scope_hashes)} scope(s))")


@cli.command("delete-user")
@db_option
@click.option("--tenant", "tenant_id", required=True)
@click.option("--user", "user_id", required=True)
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@json_option
def delete_user(db: Path | None, tenant_id: str, user_id: str, yes: bool,
                as_json: bool) -> None:
    """Erase a user in every scope of the tenant and print the erasure receipt."""
    if not yes:
        click.confirm(f"Erase every memory of user {user_id!r} in tenant {tenant_id!r}?",
                      abort=True, err=True)
    result = run_with_manager(db, lambda m: m.delete_user(operator(tenant_id), tenant_id,
                                                          user_id))
    emit(result, as_json, _receipt_text)


@cli.command("delete-all")
@db_option
@scope_options
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@json_option
def delete_all(db: Path | None, yes: bool, as_json: bool, **scope_kw: Any) -> None:
    """Erase every memory of one exact scope (not its sub-scopes)."""
    scope = scope_from(scope_kw)
    if not yes:
        click.confirm(f"Erase every memory of scope {scope.scope_hash}?", abort=True,
                      err=True)
    result = run_with_manager(db, lambda m: m.delete_all(operator(scope.tenant_id), scope))
    emit({"erased": result}, as_json, lambda r: f"erased {r['erased']} record(s)")


@cli.command("purge-expired")
@db_option
@scope_options
@click.option("--limit", type=click.IntRange(1, 100), default=100, show_default=True,
              help="records inspected per page")
@json_option
def purge_expired(db: Path | None, limit: int, as_json: bool, **scope_kw: Any) -> None:
    """Physically remove the expired memories of one exact scope, page by page."""
    scope = scope_from(scope_kw)

    async def work(m: GovernedMemoryManager) -> dict[str, int]:
        removed = pages = 0
        after: str | None = None
        while True:
            page = await m.purge_expired(operator(scope.tenant_id), scope, limit=limit,
                                         after=after)
            removed, pages = removed + page.deleted, pages + 1
            if page.next_cursor is None:
                return {"purged": removed, "pages": pages}
            after = page.next_cursor

    result = run_with_manager(db, work)
    emit(result, as_json,
         lambda r: f"purged {r['purged']} expired record(s) in {r['pages']} page(s)")


@cli.command()
@db_option
@click.option("--tenant", "tenant_id", required=True)
@click.option("--user", "user_id", default=None,
              help="replay as this user (default: the tenant's operator)")
@click.argument("snapshot_id")
@json_option
def replay(db: Path | None, tenant_id: str, user_id: str | None, snapshot_id: str,
           as_json: bool) -> None:
    """Replay a stored retrieval snapshot: what that search returned, at its versions."""

    async def work(m: GovernedMemoryManager) -> Any:
        principal = operator(tenant_id)
        if user_id is not None:
            principal = attrs.evolve(principal, user_id=user_id)
        return await m.replay(principal, snapshot_id)

    emit(run_with_manager(db, work), as_json, fmt.replay_text)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
