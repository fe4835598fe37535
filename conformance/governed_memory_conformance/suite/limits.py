"""Limits: every size of the design refused with a validation error, nothing written;
and the largest allowed value of each accepted and stored intact."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
import pytest
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import (
    MAX_CONTENT_BYTES,
    MAX_ENTITY_IDS,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_PROVENANCE_BYTES,
    MAX_QUERY_BYTES,
    MAX_SCOPE_VALUE_CHARS,
)
from governed_memory.records import MemoryRecord, Provenance
from governed_memory.requests import (
    AddRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, TENANT
from governed_memory_conformance.suite.records import record_fields

PROVENANCE_ROOM: Final = 512
TWO_BYTES: Final = "é"
"""One character, two UTF-8 bytes: limits count bytes, and this tells them apart."""


def _over_metadata_budget() -> dict[str, str]:
    return {"m": "x" * MAX_METADATA_PROVENANCE_BYTES}


def _shared_budget() -> tuple[dict[str, str], Provenance]:
    """Metadata and provenance each within bounds, together one byte over 16 KiB."""
    provenance = Provenance(source_type="s" * 1000, source_id="i" * 1000, session_id="e" * 1000)
    provenance_size = len('{"session_id":"","source_id":"","source_type":""}') + 3000
    filler = MAX_METADATA_PROVENANCE_BYTES - provenance_size - len('{"m":""}') + 1
    return {"m": "x" * filler}, provenance


@attrs.frozen
class Oversize:
    """One request just past a limit: the port refuses it before any provider sees it
    (``Harness.send`` validates as the port does), so nothing is written."""

    name: str
    call: Callable[[Harness, MemoryRecord], Awaitable[object]]
    needs: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


def _add(**fields: Any) -> Callable[[Harness, MemoryRecord], Awaitable[object]]:
    fields.setdefault("content", "within limits")
    return lambda h, _: h.send(AddRequest(scope=HOME, **fields), h.ctx())


def _update(**fields: Any) -> Callable[[Harness, MemoryRecord], Awaitable[object]]:
    return lambda h, seed: h.send(
        UpdateRequest(scope=HOME, record_id=seed.id, **fields), h.ctx())


def _search(**fields: Any) -> Callable[[Harness, MemoryRecord], Awaitable[object]]:
    fields.setdefault("scopes", (HOME,))
    fields.setdefault("query", "seed")
    return lambda h, _: h.send(SearchRequest(**fields), h.ctx())


OVERSIZE: Final = (
    Oversize("content_over_64KiB", _add(content="x" * (MAX_CONTENT_BYTES + 1))),
    Oversize("content_over_64KiB_in_bytes_not_chars",
             _add(content=TWO_BYTES * (MAX_CONTENT_BYTES // 2) + "x")),
    Oversize("content_empty", _add(content="")),
    Oversize("content_blank", _add(content=" \n\t")),
    Oversize("content_unpaired_surrogate", _add(content="half \ud800 a pair")),
    Oversize("key_over_256_bytes", _add(key="k" * (MAX_KEY_BYTES + 1))),
    Oversize("key_over_256_bytes_in_bytes_not_chars",
             _add(key=TWO_BYTES * (MAX_KEY_BYTES // 2 + 1))),
    Oversize("metadata_over_16KiB", _add(metadata=_over_metadata_budget())),
    Oversize("metadata_and_provenance_over_16KiB_together",
             _add(metadata=_shared_budget()[0], provenance=_shared_budget()[1])),
    Oversize("metadata_not_json", _add(metadata={"when": {1, 2}})),
    Oversize("metadata_non_finite_number", _add(metadata={"score": float("nan")})),
    Oversize("idempotency_key_over_256_bytes",
             _add(idempotency_key="i" * (MAX_IDEMPOTENCY_KEY_BYTES + 1))),
    Oversize("entity_ids_over_64", _add(entity_ids=tuple(f"e{n}" for n in
                                                         range(MAX_ENTITY_IDS + 1)))),
    Oversize("importance_above_1", _add(importance=1.5)),
    Oversize("expires_at_not_finite", _add(expires_at=float("inf"))),
    Oversize("expires_at_negative", _add(expires_at=-1.0)),
    Oversize("update_content_over_64KiB", _update(content="x" * (MAX_CONTENT_BYTES + 1))),
    Oversize("update_metadata_over_16KiB", _update(metadata=_over_metadata_budget())),
    Oversize("update_idempotency_key_over_256_bytes",
             _update(content="x", idempotency_key="i" * (MAX_IDEMPOTENCY_KEY_BYTES + 1))),
    Oversize("list_limit_0", lambda h, _: h.send(ListRequest(scope=HOME, limit=0),
                                                          h.ctx())),
    Oversize("list_limit_101",
             lambda h, _: h.send(ListRequest(scope=HOME, limit=101), h.ctx())),
    Oversize("search_query_over_4KiB", _search(query="q" * (MAX_QUERY_BYTES + 1)),
             ("lexical_search",)),
    Oversize("search_limit_101", _search(limit=101), ("lexical_search",)),
    Oversize("search_over_17_scopes",
             _search(scopes=tuple(Scope(TENANT, run_id=f"r{n}") for n in range(17))),
             ("lexical_search",)),
    Oversize("purge_limit_0", lambda h, _: h.send(
        PurgeExpiredRequest(scope=HOME, limit=0), h.ctx()), ("purge_expired",)),
    Oversize("purge_limit_101", lambda h, _: h.send(
        PurgeExpiredRequest(scope=HOME, limit=101), h.ctx()), ("purge_expired",)),
)


class LimitTests(ConformanceBase):
    @pytest.mark.parametrize("case", OVERSIZE, ids=str)
    @scenario
    async def test_oversized_request_is_refused_and_writes_nothing(
        self, h: Harness, case: Oversize
    ) -> None:
        missing = [name for name in case.needs if not getattr(h.capabilities, name)]
        if missing:
            pytest.skip(f"capability {', '.join(missing)} not declared by {self.describe()}")
        seed = await h.add("seed record", key="seed")
        before = [record_fields(record) for record in await h.list_all()]
        await expect_error(MemoryValidationError, case.call(h, seed), case.name)
        after = [record_fields(record) for record in await h.list_all()]
        assert after == before, f"{case.name}: the refused request changed storage"

    @scenario
    async def test_largest_allowed_values_are_stored_intact(self, h: Harness) -> None:
        content = TWO_BYTES * (MAX_CONTENT_BYTES // 2)
        key = TWO_BYTES * (MAX_KEY_BYTES // 2)
        # Room for what a provider stamps into provenance itself (the operation id).
        metadata = {"m": "x" * (MAX_METADATA_PROVENANCE_BYTES - len('{"m":""}') - PROVENANCE_ROOM)}
        entities = tuple(f"e{n}" for n in range(MAX_ENTITY_IDS))
        added = await h.add(content, key=key, metadata=metadata, entity_ids=entities,
                            idempotency_key="i" * MAX_IDEMPOTENCY_KEY_BYTES)
        stored = await h.get_key(key)
        assert stored.id == added.id
        assert (stored.content, stored.key, dict(stored.metadata), stored.entity_ids) == (
            content, key, metadata, entities), "a value at its limit was not stored intact"
        wide = Scope(TWO_BYTES * MAX_SCOPE_VALUE_CHARS, user_id="u" * MAX_SCOPE_VALUE_CHARS)
        in_wide = await h.add("in a scope of the longest values", scope=wide)
        assert (await h.get(in_wide.id, wide)).scope == wide
        assert await h.ids(wide) == [in_wide.id]
        if h.capabilities.lexical_search:
            query = "walrus " * (MAX_QUERY_BYTES // 7) + "w" * (MAX_QUERY_BYTES % 7)
            assert len(query.encode()) == MAX_QUERY_BYTES
            await h.search(query)

    @scenario
    async def test_scope_values_over_256_characters_are_refused(self, h: Harness) -> None:
        for dimensions in ({"tenant_id": "t" * (MAX_SCOPE_VALUE_CHARS + 1)},
                           {"tenant_id": TENANT, "user_id": "u" * (MAX_SCOPE_VALUE_CHARS + 1)},
                           {"tenant_id": TENANT, "session_id": "line\nbreak"}):
            try:
                Scope(**dimensions)
            except MemoryValidationError:
                continue
            raise AssertionError(f"Scope with {list(dimensions)} was accepted")
