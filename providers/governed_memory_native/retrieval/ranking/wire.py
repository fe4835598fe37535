"""What a ranking worker (:mod:`retrieval.ranking.worker`) and its pool
(:mod:`retrieval.ranking.pool`) say to each other over the worker's stdin and stdout.

Each message is a 4-byte big-endian length, then that many bytes of :mod:`marshal`
data: plain tuples, lists, dicts, strings, bytes, numbers and ``None`` (what a search's
filters and a record row are made of), which marshal writes and reads in C, and which
cannot carry code or objects the way a pickle can. A value marshal cannot write is a
``ValueError`` at the sender (the provider then searches in its own process).

Messages:

- pool → worker, first: ``("open", store)``: the store as :func:`store_spec` describes
  it (a SQLite path, or a PostgreSQL dsn and schema, and the busy timeout);
  worker → pool: ``("ready",)`` once it is open, or ``("failed", reason)``;
- pool → worker: ``("search", id, tenant_id, revisions, query)``, the query as
  :func:`query_fields` writes it; ``revisions`` asks for the scopes' revisions read in
  the search's own transaction (``tenant_id`` names the epoch);
- worker → pool: ``("found", id, revisions, candidates, ranked)`` with ``ranked`` the
  winners as ``(score, row)``, each row the ``memory_records`` columns of
  :data:`ROW_COLUMNS` in order; or ``("retry", id)`` when the search failed in the
  worker (the provider then runs it itself, where its error is raised as usual).
"""

from __future__ import annotations

import marshal
import struct
from collections.abc import Mapping
from typing import Any, Final

from governed_memory.records import MemoryType, Visibility

from governed_memory_native.sql.rows import RECORD_COLUMNS
from governed_memory_native.storage.values import SearchQuery

ROW_COLUMNS: Final = ("seq", *RECORD_COLUMNS)
HEADER: Final = struct.Struct(">I")
MAX_MESSAGE: Final = 256 * 1024 * 1024
"""A length past this is a broken stream, not a message."""
MARSHAL_VERSION: Final = 4


def encode(message: tuple[Any, ...]) -> bytes:
    payload = marshal.dumps(message, MARSHAL_VERSION)
    return HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> tuple[Any, ...]:
    message = marshal.loads(payload)
    if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
        raise ValueError("a ranking message is a tuple that starts with its kind")
    return message


def query_fields(query: SearchQuery) -> dict[str, Any]:
    return {
        "scope_hashes": list(query.scope_hashes), "tokens": list(query.tokens),
        "now": query.now, "limit": query.limit,
        "memory_types": [kind.value for kind in query.memory_types],
        "entity_ids": list(query.entity_ids),
        "metadata_filter": dict(query.metadata_filter), "valid_at": query.valid_at,
        "visibilities": [visibility.value for visibility in query.visibilities],
        "occurred_since": query.occurred_since, "occurred_before": query.occurred_before,
        "source_types": list(query.source_types), "sensitivity": list(query.sensitivity),
        "exclude_sensitivity": list(query.exclude_sensitivity),
    }


def query_from_fields(fields: Mapping[str, Any]) -> SearchQuery:
    return SearchQuery(
        scope_hashes=tuple(fields["scope_hashes"]), tokens=tuple(fields["tokens"]),
        now=fields["now"], limit=fields["limit"],
        memory_types=tuple(MemoryType(value) for value in fields["memory_types"]),
        entity_ids=tuple(fields["entity_ids"]),
        metadata_filter=dict(fields["metadata_filter"]), valid_at=fields["valid_at"],
        visibilities=tuple(Visibility(value) for value in fields["visibilities"]),
        occurred_since=fields["occurred_since"], occurred_before=fields["occurred_before"],
        source_types=tuple(fields["source_types"]), sensitivity=tuple(fields["sensitivity"]),
        exclude_sensitivity=tuple(fields["exclude_sensitivity"]),
    )


def store_spec(*, backend: str, busy_timeout_ms: int, path: str | None = None,
               dsn: str | None = None, schema: str | None = None) -> dict[str, Any]:
    """The store a worker opens: the provider's own, read-only."""
    return {"backend": backend, "busy_timeout_ms": busy_timeout_ms, "path": path,
            "dsn": dsn, "schema": schema}
