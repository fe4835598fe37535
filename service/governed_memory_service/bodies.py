"""The JSON bodies of the write and search routes, as typed values.

They are structured with the library's strict converter: an unknown key, ``"1"`` for
a number or a string for an array is refused with the path of the offending field,
and the server never guesses what a client meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
from cattrs.errors import BaseValidationError
from cattrs.v import transform_error
from governed_memory import MemoryType, Provenance, Visibility
from governed_memory.converter import converter
from governed_memory.errors import MemoryValidationError
from governed_memory.ranking_options import RankingOptions
from governed_memory.tiers import Role, ToolCall

__all__ = ["AddBody", "ContextBody", "MultiSearchBody", "PutBody", "ScopeBody", "SearchBody",
           "TurnBody", "UpdateBody", "WorkingStateBody", "parse_body"]

B = TypeVar("B")


@attrs.frozen(kw_only=True)
class AddBody:
    """``POST .../memories``: the record to add (its scope is in the path and query)."""

    content: str
    memory_type: MemoryType = MemoryType.NOTE
    key: str | None = None
    metadata: Mapping[str, Any] | None = None
    provenance: Provenance | None = None
    visibility: Visibility = Visibility.PRIVATE
    importance: float = 0.5
    entity_ids: tuple[str, ...] = ()
    valid_from: float | None = None
    invalid_at: float | None = None
    supersedes: str | None = None
    expires_at: float | None = None
    occurred_at: float | None = None


@attrs.frozen(kw_only=True)
class UpdateBody:
    """``PATCH .../memories/{id}``: only the fields given change; the revision to
    compare against travels in ``If-Match``, not here."""

    content: str | None = None
    memory_type: MemoryType | None = None
    metadata: Mapping[str, Any] | None = None
    importance: float | None = None
    visibility: Visibility | None = None
    entity_ids: tuple[str, ...] | None = None
    expires_at: float | None = None
    clear_expires_at: bool = False
    invalid_at: float | None = None
    superseded_by: str | None = None
    occurred_at: float | None = None


@attrs.frozen(kw_only=True)
class PutBody:
    """``PUT .../memories/by-key/{key}``: the content written under the key; the other
    fields set a new record's values, or change the holder's when given (``If-Match``
    makes the put a compare-and-set)."""

    content: str
    memory_type: MemoryType | None = None
    metadata: Mapping[str, Any] | None = None
    importance: float | None = None
    visibility: Visibility | None = None
    entity_ids: tuple[str, ...] | None = None
    expires_at: float | None = None


@attrs.frozen(kw_only=True)
class SearchBody:
    """``POST .../memories/search``: the query travels in the body so that it never
    lands in an access log or a proxy's URL cache. ``visibility``, ``source_types``,
    ``sensitivity`` and ``exclude_sensitivity`` are the read-time filters of
    ``governed_memory.read_filters``, applied before the top ``limit``."""

    query: str
    limit: int | None = None
    memory_types: tuple[MemoryType, ...] = ()
    metadata_filter: Mapping[str, Any] | None = None
    entity_ids: tuple[str, ...] = ()
    ranking: RankingOptions | None = None
    occurred_since: float | None = None
    occurred_before: float | None = None
    as_of: float | None = None
    visibility: Visibility | None = None
    source_types: tuple[str, ...] = ()
    sensitivity: tuple[str, ...] = ()
    exclude_sensitivity: tuple[str, ...] = ()
    cursor: str | None = None
    """A result's ``next_cursor``: the next page of the same search."""


@attrs.frozen(kw_only=True)
class ScopeBody:
    """One exact scope of a multi-scope search: the dimensions below the tenant (which
    is the path's, so one request can never name two tenants). ``{}`` is the
    tenant-wide scope; an absent dimension is absent, never a wildcard."""

    workspace_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    domain_pack: str | None = None
    shared: bool = False
    """The scope without a user, even for a credential bound to one (which otherwise
    means its own user where ``user_id`` is left out)."""


@attrs.frozen(kw_only=True)
class MultiSearchBody(SearchBody):
    """``POST .../memories/multi-search``: one search over several exact scopes, with
    the search fields of :class:`SearchBody`.

    The scopes travel in the body as a list of objects rather than in the query: a
    query string has no unambiguous way to group dimensions into scopes, and a list of
    objects keeps each scope exact (the manager authorizes every one of them)."""

    scopes: tuple[ScopeBody, ...]


@attrs.frozen(kw_only=True)
class TurnBody:
    """``POST .../turns``: one conversation turn; ``turn_id`` makes the append
    idempotent (the same id twice stores the turn once)."""

    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    metadata: Mapping[str, Any] | None = None
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class WorkingStateBody:
    """``PATCH .../working-state``: keys merged into the run's state, or the whole
    state with ``replace``; every write moves the expiry ``ttl_seconds`` on."""

    state: Mapping[str, Any]
    ttl_seconds: float | None = None
    replace: bool = False


@attrs.frozen(kw_only=True)
class BlockEditBody:
    """``POST .../blocks/{name}/edits``: one edit of a memory block. ``edit`` names the
    verb and the verb names its fields: ``replace`` takes ``old`` and ``new``,
    ``append`` takes ``text``, ``rethink`` takes ``value``; ``expected_version`` makes it
    a compare-and-set (``409`` when the block moved on)."""

    edit: str
    old: str | None = None
    new: str | None = None
    text: str | None = None
    value: str | None = None
    expected_version: int | None = None


@attrs.frozen(kw_only=True)
class ContextBody:
    """``POST .../context``: the turn's question and the entities already in focus."""

    question: str
    anchor_entity_ids: tuple[str, ...] = ()


def parse_body(data: object, kind: type[B]) -> B:
    """Structure ``data``; a refusal names the first bad field as ``body.<path>``."""
    if not isinstance(data, dict):
        raise MemoryValidationError("the body must be a JSON object", field="body")
    try:
        return converter.structure(data, kind)
    except MemoryValidationError:
        raise
    except BaseValidationError as exc:
        messages = transform_error(exc, path="body")
        field = messages[0].rpartition(" @ ")[2] if messages else "body"
        raise MemoryValidationError("; ".join(messages), field=field) from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        # ArithmeticError: a conversion overflowing (int to float); the JSON reader
        # bounds numbers to 64 bits so none should, but a refusal is never a 500.
        raise MemoryValidationError(f"body: {exc}", field="body") from None
