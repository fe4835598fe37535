"""``governed-memory add|put|get|list|search|update|delete|history|replay``: one governed
operation each, on one exact scope, as the tenant's operator.

``add``, ``put`` and ``update`` take the content the same way: a positional argument,
or ``-`` for stdin. Only ``add`` and ``put`` may create the database; the others refuse
one that does not exist (exit 4), naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click

from governed_memory.cli import format as fmt
from governed_memory.cli.common import (
    MOMENT,
    content_argument,
    creates_database,
    db_option,
    emit,
    json_option,
    operator,
    parse_metadata,
    read_content,
    run_with_manager,
    scope_from,
    scope_options,
)
from governed_memory.records import MemoryType, Visibility

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager

TYPES = click.Choice([t.value for t in MemoryType])
VISIBILITIES = click.Choice([v.value for v in Visibility])


@click.command()
@db_option
@scope_options
@content_argument()
@click.option("--type", "memory_type", type=TYPES, default="note", show_default=True)
@click.option("--key", default=None, help="unique key within the scope")
@click.option("--metadata", default=None, help="JSON object")
@click.option("--importance", type=float, default=0.5, show_default=True)
@click.option("--ttl", type=float, default=None, help="seconds until the memory expires")
@click.option("--occurred-at", type=MOMENT, default=None,
              help="when it happened, if not now (ISO 8601 or epoch seconds)")
@click.option("--idempotency-key", default=None)
@click.option("--source-type", default=None,
              help="where it came from (provenance: web, tool, conversation, ...)")
@click.option("--source-id", default=None, help="the source's own id (a URL, a turn id)")
@json_option
@creates_database
def add(db: Path | None, content: str, memory_type: str, key: str | None,
        metadata: str | None, importance: float, ttl: float | None,
        occurred_at: float | None, idempotency_key: str | None, source_type: str | None,
        source_id: str | None, as_json: bool, **scope_kw: Any) -> None:
    """Write a memory (CONTENT, or - to read it from stdin)."""
    scope = scope_from(scope_kw)
    text = read_content(content)
    assert text is not None  # the argument is required
    meta = parse_metadata(metadata)
    provenance = {name: value for name, value in (("source_type", source_type),
                                                  ("source_id", source_id)) if value}

    async def work(m: GovernedMemoryManager) -> Any:
        expires = None if ttl is None else m.clock.now() + ttl
        return await m.add(operator(scope.tenant_id), scope, text, memory_type=memory_type,
                           key=key, metadata=meta, importance=importance, expires_at=expires,
                           idempotency_key=idempotency_key, provenance=provenance,
                           occurred_at=occurred_at)

    emit(run_with_manager(db, work), as_json, fmt.record_text)


@click.command()
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


@click.command("list")
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


@click.command()
@db_option
@scope_options
@click.argument("query")
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--type", "memory_types", type=TYPES, multiple=True)
@click.option("--since", type=MOMENT, default=None,
              help="only what happened at or after this time")
@click.option("--before", type=MOMENT, default=None, help="only what happened before this time")
@click.option("--as-of", type=MOMENT, default=None,
              help="search memory as it stood at this time")
@click.option("--visibility", type=VISIBILITIES, default=None,
              help="only private or only shared memories")
@click.option("--source-type", "source_types", multiple=True,
              help="only memories whose provenance source type is this (repeatable)")
@click.option("--sensitivity", multiple=True,
              help="only memories labelled with this sensitivity (repeatable)")
@click.option("--exclude-sensitivity", multiple=True,
              help="leave out memories labelled with this sensitivity (repeatable)")
@click.option("--cursor", default=None,
              help="a previous page's next cursor: the next --limit results of the search")
@json_option
def search(db: Path | None, query: str, limit: int, memory_types: tuple[str, ...],
           since: float | None, before: float | None, as_of: float | None,
           visibility: str | None, source_types: tuple[str, ...],
           sensitivity: tuple[str, ...], exclude_sensitivity: tuple[str, ...],
           cursor: str | None, as_json: bool, **scope_kw: Any) -> None:
    """Search the memories of one exact scope. Times are ISO 8601 (UTC when they name
    no offset) or epoch seconds. A sensitivity label is a memory's
    metadata["sensitivity"]; the filters apply before the top --limit."""
    scope = scope_from(scope_kw)
    result = run_with_manager(db, lambda m: m.search(
        operator(scope.tenant_id), scope, query, limit=limit, memory_types=memory_types,
        occurred_since=since, occurred_before=before, as_of=as_of, visibility=visibility,
        source_types=source_types, sensitivity=sensitivity,
        exclude_sensitivity=exclude_sensitivity, cursor=cursor))
    emit(result, as_json, fmt.search_text)


@click.command()
@db_option
@scope_options
@click.argument("key")
@content_argument()
@click.option("--expected-revision", default=None, help="refuse if the record has moved on")
@click.option("--type", "memory_type", type=TYPES, default=None)
@click.option("--metadata", default=None, help="JSON object (replaces the metadata)")
@click.option("--importance", type=float, default=None)
@json_option
@creates_database
def put(db: Path | None, key: str, content: str, expected_revision: str | None,
        memory_type: str | None, metadata: str | None, importance: float | None,
        as_json: bool, **scope_kw: Any) -> None:
    """Write CONTENT (or - for stdin) under KEY: added when the key is new, else a new
    version; compare-and-set with --expected-revision."""
    scope = scope_from(scope_kw)
    text = read_content(content)
    assert text is not None  # the argument is required
    meta = parse_metadata(metadata)
    result = run_with_manager(db, lambda m: m.put(
        operator(scope.tenant_id), scope, key, text, expected_revision=expected_revision,
        memory_type=memory_type, metadata=meta, importance=importance))
    emit(result, as_json, fmt.record_text)


@click.command()
@db_option
@scope_options
@click.argument("record_id")
@content_argument(required=False)
@click.option("--expected-revision", default=None, help="refuse if the record has moved on")
@click.option("--type", "memory_type", type=TYPES, default=None)
@click.option("--metadata", default=None, help="JSON object (replaces the metadata)")
@click.option("--importance", type=float, default=None)
@click.option("--occurred-at", type=MOMENT, default=None, help="a corrected event time")
@click.option("--idempotency-key", default=None)
@json_option
def update(db: Path | None, record_id: str, content: str | None,
           expected_revision: str | None, memory_type: str | None, metadata: str | None,
           importance: float | None, occurred_at: float | None,
           idempotency_key: str | None, as_json: bool, **scope_kw: Any) -> None:
    """Change a memory: new CONTENT (or - for stdin) and/or fields; compare-and-set with
    --expected-revision."""
    scope = scope_from(scope_kw)
    text = read_content(content)
    meta = parse_metadata(metadata)
    result = run_with_manager(db, lambda m: m.update(
        operator(scope.tenant_id), scope, record_id, expected_revision=expected_revision,
        content=text, memory_type=memory_type, metadata=meta, importance=importance,
        occurred_at=occurred_at, idempotency_key=idempotency_key))
    emit(result, as_json, fmt.record_text)


@click.command()
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


@click.command()
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


@click.command()
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
