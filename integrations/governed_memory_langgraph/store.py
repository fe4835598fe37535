"""``GovernedStore``: LangGraph's ``BaseStore`` over the governed memory manager.

Every store operation is one or more of the manager's own operations, as the call's
principal (``governed_memory_langgraph.principals``) in the scope its namespace maps to
(``governed_memory_langgraph.namespaces``): each is authorized, decided by the policies,
traced and audited like any other memory operation, and a refusal is raised as the
library's typed error rather than hidden.

- ``get`` is a ``lookup`` of the item's record key (a miss is ``None``, a completed read);
- ``put`` reads the key, then ``add`` or a compare-and-set ``update`` of the revision it
  read, retried when another writer got there first (LangGraph's put is last-writer
  wins, so a lost race is re-read, never overwritten blind); ``put(value=None)`` and
  ``delete`` are a compare-and-set ``delete`` (soft: the history stays for the audit);
- ``search`` with a query is a governed ``search`` over the scopes the prefix reaches,
  the namespace prefix and the filter's exact equalities applied in the datastore;
  without a query it pages through those scopes with ``list``, oldest first;
- ``list_namespaces`` pages through the scopes the principal can reach and lists the
  namespaces that hold a live item.

As in LangGraph's database stores, the reads of one batch see the store as it was
before the batch's writes, and writes to one item collapse to the last.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryScopeError,
    MemoryValidationError,
    Principal,
    Provenance,
    Scope,
    SearchHit,
)
from governed_memory.errors import MemoryConfigurationError
from governed_memory.sync import SyncMemoryManager
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

import governed_memory_langgraph.filters as filters
from governed_memory_langgraph.items import (
    FORMAT,
    INDEXED,
    ITEM,
    DecodedItem,
    decode,
    encode,
    level_key,
    record_key,
)
from governed_memory_langgraph.namespaces import (
    DEFAULT_MAPPING,
    NamespaceMapping,
    NamespaceRule,
)
from governed_memory_langgraph.ports import MemoryPort, Runner
from governed_memory_langgraph.principals import PrincipalFrom, PrincipalSource, run_origin

__all__ = ["GovernedStore"]

PAGE: Final = 100
"""The manager's largest page (``list`` and ``search``)."""
SEARCH_SCOPES: Final = 16
"""Scopes one governed search spans at most."""
ATTEMPTS: Final = 3
"""Reads and writes of one put or delete before a race is reported as a conflict."""


def _mapping(value: NamespaceMapping | Iterable[NamespaceRule | Sequence[str]] | None
             ) -> NamespaceMapping:
    if value is None:
        return DEFAULT_MAPPING
    if isinstance(value, NamespaceMapping):
        return value
    return NamespaceMapping(tuple(value))


def _index_fields(index: IndexConfig | None) -> list[str] | None:
    if not index:
        return None
    unused = sorted(set(index) - {"fields"})
    if unused:
        raise MemoryConfigurationError(
            f"index takes only 'fields' here ({', '.join(unused)} given): the manager's "
            "profile embeds the records ([stores.embedder]), the store does not")
    fields = index.get("fields")
    return None if fields is None else list(fields)


def _ttl_config(ttl: TTLConfig | None) -> TTLConfig | None:
    if ttl is None:
        return None
    if ttl.get("sweep_interval_minutes") is not None:
        raise MemoryConfigurationError(
            "sweep_interval_minutes: expired items are hidden from every read at once and "
            "removed by the operator's purge_expired (governed-memory purge-expired, or "
            "the worker), not by the store")
    if ttl.get("refresh_on_read"):
        raise MemoryConfigurationError(
            "refresh_on_read: a read never writes in a governed store; a TTL is an "
            "expiry set by each put")
    default = ttl.get("default_ttl")
    if default is not None:
        _check_ttl(default)
    return {**ttl, "refresh_on_read": False}


def _check_ttl(minutes: object) -> float:
    if (isinstance(minutes, bool) or not isinstance(minutes, int | float)
            or not minutes > 0):
        raise MemoryValidationError("ttl is a positive number of minutes", field="ttl")
    return float(minutes)


def _check_page(limit: int, offset: int) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MemoryValidationError(f"{name} is a non-negative integer", field=name)


@attrs.frozen(slots=True)
class _Call:
    """What one store call acts as: found in the caller's context before the call is
    handed to whichever thread or loop runs it."""

    principal: Principal
    origin: Provenance


def _has_prefix(namespace: Sequence[str], prefix: Sequence[str]) -> bool:
    return tuple(namespace[:len(prefix)]) == tuple(prefix)


def _condition_holds(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix and suffix conditions, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise MemoryValidationError(f"unsupported match type {condition.match_type!r}",
                                    field="match_conditions")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


class GovernedStore(BaseStore):
    """A LangGraph store whose every operation is a governed memory operation.

    ``manager`` is the async :class:`~governed_memory.GovernedMemoryManager` (async
    graphs: ``ainvoke``, ``astream``) or the sync facade
    :class:`~governed_memory.sync.SyncMemoryManager` (``invoke``, scripts; async calls
    then run the same logic in a worker thread). Over the async manager, sync calls
    (a sync node of an async run) are sent, from another thread, to the loop the store
    last served an async call on (or was built on).

    ``namespaces`` maps namespaces to scopes (default: the principal's user scope);
    ``principal`` fixes the principal (else each call's run binds it, see
    :meth:`bind` and ``governed_memory_langgraph.principals``). ``index`` takes
    LangGraph's ``{"fields": [...]}`` (which text of a value is its content and is
    searched; the embedder is the manager's). ``content_field`` is the value field that
    becomes the record's content when it is the indexed text. ``ttl`` is LangGraph's
    ``TTLConfig`` (``default_ttl`` only: an expiry set by each put).
    """

    supports_ttl = True

    def __init__(
        self,
        manager: GovernedMemoryManager | SyncMemoryManager,
        *,
        namespaces: NamespaceMapping | Iterable[NamespaceRule | Sequence[str]] | None = None,
        principal: Principal | None = None,
        principal_key: str = "principal",
        principal_from: PrincipalFrom | None = None,
        index: IndexConfig | None = None,
        content_field: str = "content",
        ttl: TTLConfig | None = None,
    ) -> None:
        self._runner = Runner(manager)
        self.namespaces = _mapping(namespaces)
        self._principals = PrincipalSource(principal, principal_key, principal_from)
        self._fields = _index_fields(index)
        self.content_field = content_field
        self.ttl_config = _ttl_config(ttl)

    def bind(self, principal: Principal) -> GovernedStore:
        """This store acting for ``principal`` on every call (a run that binds another
        principal is refused): for code outside a graph run, or a graph that serves one
        principal. The view shares the manager and the mapping."""
        view = copy.copy(self)
        view._principals = self._principals.bind(principal)
        return view

    @property
    def principal(self) -> Principal | None:
        """The principal fixed on this store, if any."""
        return self._principals.fixed

    # -- BaseStore ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        call = _Call(self._principals.resolve(), run_origin())
        return self._runner.call(lambda port: self._execute(port, call, ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        call = _Call(self._principals.resolve(), run_origin())
        return await self._runner.acall(lambda port: self._execute(port, call, ops))

    # -- one batch ----------------------------------------------------------------------

    async def _execute(self, port: MemoryPort, call: _Call,
                       ops: Sequence[Op]) -> list[Result]:
        principal = call.principal
        results: list[Result] = [None] * len(ops)
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results[i] = await self._get(port, principal, op)
            elif isinstance(op, SearchOp):
                results[i] = await self._search(port, principal, op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = await self._list_namespaces(port, principal, op)
            elif isinstance(op, PutOp):
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                if op.value is not None and op.namespace[0] == "langgraph":
                    raise InvalidNamespaceError(
                        'Root label for namespace cannot be "langgraph".')
                writes.pop((tuple(op.namespace), op.key), None)
                writes[(tuple(op.namespace), op.key)] = op
            else:
                raise MemoryValidationError(f"unknown store operation {type(op).__name__}",
                                            field="ops")
        for op in writes.values():
            await self._put(port, call, op)
        return results

    async def _get(self, port: MemoryPort, principal: Principal, op: GetOp) -> Item | None:
        if not op.namespace:
            return None
        scope = self.namespaces.place(principal, op.namespace).scope
        record = await port.lookup(principal, scope, key=record_key(op.namespace, op.key))
        decoded = None if record is None else decode(record)
        if decoded is None:
            return None
        # The caller's own namespace and key: stored copies may have been redacted.
        return Item(value=decoded.value, key=op.key, namespace=tuple(op.namespace),
                    created_at=decoded.created_at, updated_at=decoded.updated_at)

    async def _put(self, port: MemoryPort, call: _Call, op: PutOp) -> None:
        principal = call.principal
        placement = self.namespaces.place(principal, op.namespace)
        scope, key = placement.scope, record_key(op.namespace, op.key)
        if op.value is None:
            await self._delete(port, principal, scope, key)
            return
        encoded = encode(op.namespace, op.key, op.value, op.index,
                         default_fields=self._fields, content_field=self.content_field)
        expires_at = None if op.ttl is None else port.now() + 60.0 * _check_ttl(op.ttl)
        for _ in range(ATTEMPTS):
            current = await port.lookup(principal, scope, key=key)
            try:
                if current is None:
                    await port.add(principal, scope, encoded.content,
                                   memory_type=placement.rule.memory_type, key=key,
                                   metadata=encoded.metadata, expires_at=expires_at,
                                   provenance=attrs.evolve(
                                       call.origin, source_type=placement.rule.source_type))
                else:
                    await port.update(
                        principal, scope, current.id, expected_revision=current.revision,
                        content=encoded.content, memory_type=placement.rule.memory_type,
                        metadata=encoded.metadata, expires_at=expires_at,
                        clear_expires_at=expires_at is None and current.expires_at is not None)
                return
            except (MemoryConflictError, MemoryNotFoundError):
                continue  # another writer changed the key between the read and the write
        raise MemoryConflictError(
            "the item's key kept changing under this put, or is held by a record awaiting "
            "review")

    async def _delete(self, port: MemoryPort, principal: Principal, scope: Scope,
                      key: str) -> None:
        for _ in range(ATTEMPTS):
            current = await port.lookup(principal, scope, key=key)
            if current is None:
                return
            try:
                await port.delete(principal, scope, current.id,
                                  expected_revision=current.revision)
                return
            except MemoryNotFoundError:
                return
            except MemoryConflictError:
                continue
        raise MemoryConflictError("the item kept changing under this delete")

    # -- reads over several records -----------------------------------------------------

    def _owned(self, principal: Principal, scope: Scope,
               record: MemoryRecord) -> DecodedItem | None:
        """The item a record holds, if it is this store's and its namespace still maps to
        the scope it was found in (what ``get`` would read)."""
        decoded = decode(record)
        if decoded is None:
            return None
        try:
            placed = self.namespaces.place(principal, decoded.namespace).scope
        except MemoryValidationError:
            return None
        return decoded if placed.scope_hash == scope.scope_hash else None

    async def _search(self, port: MemoryPort, principal: Principal,
                      op: SearchOp) -> list[SearchItem]:
        _check_page(op.limit, op.offset)
        filters.check(op.filter)
        prefix = tuple(op.namespace_prefix)
        scopes = self.namespaces.reachable(principal, prefix)
        if not scopes or op.limit == 0:
            return []

        def keep(decoded: DecodedItem) -> bool:
            return _has_prefix(decoded.namespace, prefix) and filters.matches(decoded.value,
                                                                               op.filter)

        if op.query is not None and op.query.strip():
            return await self._ranked(port, principal, scopes, op, prefix, keep)
        wanted = op.offset + op.limit
        streams = [await self._scan(port, principal, scope, keep, wanted) for scope in scopes]
        merged = heapq.merge(*streams, key=lambda pair: pair[0])
        return [decoded.search_item() for _, decoded in merged][op.offset:wanted]

    async def _ranked(self, port: MemoryPort, principal: Principal, scopes: Sequence[Scope],
                      op: SearchOp, prefix: tuple[str, ...],
                      keep: Callable[[DecodedItem], bool]) -> list[SearchItem]:
        wanted = op.offset + op.limit
        if wanted > PAGE:
            raise MemoryValidationError(
                f"a search with a query ranks at most {PAGE} items: offset + limit must not "
                f"exceed {PAGE}", field="limit")
        pushed = filters.pushdown(op.filter, moved_field=self.content_field)
        exact = pushed == dict(op.filter or {})
        metadata_filter: dict[str, Any] = {
            **pushed, ITEM: FORMAT, INDEXED: True,
            **{level_key(i): label for i, label in enumerate(prefix)}}
        assert op.query is not None
        hits: list[tuple[SearchHit, Scope]] = []
        for start in range(0, len(scopes), SEARCH_SCOPES):
            chunk = scopes[start:start + SEARCH_SCOPES]
            result = await port.search(principal, chunk, op.query,
                                       limit=wanted if exact else PAGE,
                                       metadata_filter=metadata_filter)
            by_hash = {scope.scope_hash: scope for scope in chunk}
            hits.extend((hit, by_hash[hit.record.scope_hash]) for hit in result.hits)
        if len(scopes) > SEARCH_SCOPES:
            hits.sort(key=lambda pair: (-pair[0].score, pair[0].record.id))
        found: list[SearchItem] = []
        for hit, scope in hits:
            decoded = self._owned(principal, scope, hit.record)
            if decoded is not None and keep(decoded):
                found.append(decoded.search_item(hit.score))
        return found[op.offset:wanted]

    async def _scan(self, port: MemoryPort, principal: Principal, scope: Scope,
                    keep: Callable[[DecodedItem], bool],
                    wanted: int | None) -> list[tuple[str, DecodedItem]]:
        """Items of one scope that ``keep`` accepts, oldest first (by record id), up to
        ``wanted`` of them (all for ``None``)."""
        found: list[tuple[str, DecodedItem]] = []
        cursor: str | None = None
        while wanted is None or len(found) < wanted:
            page = await port.list(principal, scope, limit=PAGE, cursor=cursor)
            for record in page.items:
                decoded = self._owned(principal, scope, record)
                if decoded is not None and keep(decoded):
                    found.append((record.id, decoded))
            cursor = page.next_cursor
            if cursor is None or not page.items:
                break
        return found if wanted is None else found[:wanted]

    async def _list_namespaces(self, port: MemoryPort, principal: Principal,
                               op: ListNamespacesOp) -> list[tuple[str, ...]]:
        _check_page(op.limit, op.offset)
        if op.max_depth is not None and (isinstance(op.max_depth, bool)
                                         or not isinstance(op.max_depth, int)
                                         or op.max_depth < 1):
            raise MemoryValidationError("max_depth is a positive integer", field="max_depth")
        conditions = tuple(op.match_conditions or ())
        prefixes = [tuple(c.path) for c in conditions if c.match_type == "prefix"]
        scopes = self.namespaces.reachable(principal, prefixes[0] if prefixes else (),
                                           wildcards=True)
        namespaces: set[tuple[str, ...]] = set()

        def keep(decoded: DecodedItem) -> bool:
            return all(_condition_holds(c, decoded.namespace) for c in conditions)

        for scope in scopes:
            try:
                found = await self._scan(port, principal, scope, keep, None)
            except MemoryScopeError:
                continue  # a scope this principal cannot read lists nothing
            namespaces.update(decoded.namespace for _, decoded in found)
        if op.max_depth is not None:
            namespaces = {ns[:op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset:op.offset + op.limit]
