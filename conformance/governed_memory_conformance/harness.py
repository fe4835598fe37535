"""What a suite test gets: a started provider, the clock it was given and short helpers.

Each helper builds a fresh ``OperationContext`` whose ``now`` is read from the manual
clock, exactly as the manager does, so moving the clock is all a test needs to make a
record expire.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError
from governed_memory.operation_context import OperationContext
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.provider import MemoryProvider
from governed_memory.records import DeleteResult, MemoryRecord, MemoryVersion, Page, SearchResult
from governed_memory.request import Request
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope

from governed_memory_conformance.scopes import HOME, SUITE_SCOPES

E = TypeVar("E", bound=BaseException)
T = TypeVar("T")

MAX_PAGES: Final = 10_000
"""A list walk longer than this is a cursor that never ends, not a big scope."""


async def expect_error(kind: type[E], call: Awaitable[Any], doing: str) -> E:
    """Await ``call`` and insist it raises ``kind``; the failure says what was attempted."""
    try:
        result = await call
    except kind as exc:
        return exc
    except GovernedMemoryError as exc:
        raise AssertionError(
            f"{doing}: expected {kind.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{doing}: expected {kind.__name__}, but it returned {result!r}")


class Harness:
    """One started provider plus the manual clock it was built with."""

    def __init__(self, provider: MemoryProvider, clock: ManualClock) -> None:
        self.provider = provider
        self.clock = clock
        self.capabilities: Capabilities = provider.capabilities()
        self._operations = itertools.count(1)

    # -- contexts -----------------------------------------------------------------

    def ctx(self, tenant_id: str = HOME.tenant_id) -> OperationContext:
        """A new operation at the clock's current time, by an admin service principal.

        Providers do not authorize (the manager does), so the principal only has to be
        well formed; it belongs to the tenant acted on, as it would in production.
        """
        return OperationContext(
            operation_id=f"conformance-op-{next(self._operations)}",
            principal=Principal("conformance-suite", PrincipalKind.SERVICE, tenant_id,
                                permissions=frozenset({Permission.ADMIN})),
            now=self.clock.now(),
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- operations -----------------------------------------------------------------

    async def send(self, request: Request[T], ctx: OperationContext | None = None) -> T:
        """Send ``request`` to the provider as the activity port does: validated first,
        because a provider is only ever handed a request the port has validated and
        may trust it (a request over a limit raises ``MemoryValidationError`` here,
        before the provider sees it). The port also refuses what only its clock can
        (``validate_at``: an expiry already past for a new record); the suite leaves
        that out, so it can still hand a provider the zero values (``expires_at=0.0``)
        a policy's transformation could produce and check they are stored as given."""
        ctx = ctx or self.ctx(request.tenant(HOME.tenant_id))
        request.validate()
        return await request.send(self.provider, ctx)

    async def add(self, content: str = "the user likes green tea", scope: Scope = HOME,
                  **fields: Any) -> MemoryRecord:
        request = AddRequest(scope=scope, content=content, **fields)
        return await self.send(request, self.ctx(scope.tenant_id))

    async def get(self, record_id: str, scope: Scope = HOME) -> MemoryRecord:
        request = GetRequest(scope=scope, record_id=record_id)
        return await self.send(request, self.ctx(scope.tenant_id))

    async def get_key(self, key: str, scope: Scope = HOME) -> MemoryRecord:
        return await self.send(GetRequest(scope=scope, key=key), self.ctx(scope.tenant_id))

    async def page(self, scope: Scope = HOME, limit: int = 20, cursor: str | None = None,
                   **fields: Any) -> Page[MemoryRecord]:
        request = ListRequest(scope=scope, limit=limit, cursor=cursor, **fields)
        return await self.send(request, self.ctx(scope.tenant_id))

    async def list_all(self, scope: Scope = HOME, limit: int = 100,
                       **fields: Any) -> list[MemoryRecord]:
        """Every visible record of ``scope``, following cursors to the end."""
        found: list[MemoryRecord] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.page(scope, limit=limit, cursor=cursor, **fields)
            assert len(page.items) <= limit, (
                f"list returned {len(page.items)} records for limit {limit}")
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            assert page.items, "an empty list page still carried a next_cursor"
            cursor = page.next_cursor
        raise AssertionError(f"list did not end after {MAX_PAGES} pages")

    async def ids(self, scope: Scope = HOME, limit: int = 100) -> list[str]:
        return [record.id for record in await self.list_all(scope, limit=limit)]

    async def search(self, query: str, scopes: tuple[Scope, ...] = (HOME,), limit: int = 10,
                     **fields: Any) -> SearchResult:
        request = SearchRequest(scopes=scopes, query=query, limit=limit, **fields)
        return await self.send(request, self.ctx(scopes[0].tenant_id))

    async def update(self, record_id: str, scope: Scope = HOME, **fields: Any) -> MemoryRecord:
        request = UpdateRequest(scope=scope, record_id=record_id, **fields)
        return await self.send(request, self.ctx(scope.tenant_id))

    async def delete(self, record_id: str, scope: Scope = HOME, **fields: Any) -> DeleteResult:
        request = DeleteRequest(scope=scope, record_id=record_id, **fields)
        return await self.send(request, self.ctx(scope.tenant_id))

    async def remove(self, record_id: str, scope: Scope = HOME) -> DeleteResult:
        """Delete the way the provider supports: soft if declared, else hard."""
        hard = not self.capabilities.soft_delete
        return await self.delete(record_id, scope, hard=hard)

    async def history(self, record_id: str, scope: Scope = HOME) -> tuple[MemoryVersion, ...]:
        request = HistoryRequest(scope=scope, record_id=record_id)
        return await self.send(request, self.ctx(scope.tenant_id))

    # -- observations -----------------------------------------------------------------

    async def is_invisible(self, record: MemoryRecord, scope: Scope | None = None) -> bool:
        """True when ``get`` by id (and by key, if it has one) finds nothing."""
        where = scope or record.scope
        try:
            await self.get(record.id, where)
        except MemoryNotFoundError:
            pass
        else:
            return False
        if record.key is None:
            return True
        try:
            found = await self.get_key(record.key, where)
        except MemoryNotFoundError:
            return True
        return found.id != record.id

    async def assert_invisible(self, record: MemoryRecord, why: str) -> None:
        """Not returned by get, get by key, list or (if declared) lexical search."""
        assert await self.is_invisible(record), f"{why}: get still returns the record"
        listed = await self.ids(record.scope)
        assert record.id not in listed, f"{why}: list still returns the record"
        if self.capabilities.lexical_search:
            result = await self.search(record.content, (record.scope,), limit=100)
            assert record.id not in [hit.record.id for hit in result.hits], (
                f"{why}: search still returns the record")


async def occupied_scopes(provider: MemoryProvider, clock: ManualClock) -> list[Scope]:
    """The scopes the suite writes to in which ``provider`` already lists a record."""
    h = Harness(provider, clock)
    return [scope for scope in SUITE_SCOPES if (await h.page(scope, limit=1)).items]


NOT_EMPTY_ADVICE: Final = (
    "so instances share storage. Give each instance its own namespace: put '{namespace}' "
    "in the config where the provider names its storage (a key prefix, a schema, a "
    "database or collection name; '{tmp}' for files), and let the cleanup hook remove what "
    "an instance leaves (a dispose_storage() method on the provider, or cleanup_provider "
    "in the test class; see docs/writing-a-provider.md)")


async def assert_empty(provider: MemoryProvider, clock: ManualClock, who: str) -> None:
    """Fail plainly when a provider that should be fresh already holds records."""
    occupied = await occupied_scopes(provider, clock)
    if occupied:
        names = ", ".join(str(scope.dimensions()) for scope in occupied[:3])
        more = f" and {len(occupied) - 3} more" if len(occupied) > 3 else ""
        raise AssertionError(
            f"{who}: a new provider instance is not empty: it already lists records in "
            f"{len(occupied)} scope(s) the suite writes to ({names}{more}), "
            + NOT_EMPTY_ADVICE)
