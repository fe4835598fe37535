"""Scope isolation: no read returns, and no write touches, another scope's record.

Scopes are exact. The generated scopes draw every dimension from the same two values,
so the usual near misses are common: a parent and its child, the same value in another
dimension, the same user in another tenant.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final

import attrs
import hypothesis
import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryNotFoundError,
)
from governed_memory.provider import MemoryProvider
from governed_memory.records import MemoryRecord
from governed_memory.scope import Scope
from hypothesis import strategies as st

from governed_memory_conformance.base import THOROUGH_NOT_REQUESTED, ConformanceBase, scenario
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, LOOKALIKES, NEIGHBOURS
from governed_memory_conformance.suite.records import assert_same_record

VALUES: Final = ("x", "y")
WORDS: Final = ("tea", "coffee", "walk", "green")

_dimension = st.sampled_from((None, *VALUES))
scopes: st.SearchStrategy[Scope] = st.builds(
    Scope, tenant_id=st.sampled_from(VALUES), project_id=_dimension, user_id=_dimension,
    session_id=_dimension, agent_id=_dimension,
)


@attrs.frozen
class Write:
    """One add in the plan: which scope, what text, an optional key and idempotency key,
    and what the owner then does to the new record in its own scope."""

    scope: int
    words: str
    key: str | None
    idempotency_key: str | None
    then: str | None = None
    """``None``, ``"update"`` (new content) or ``"delete"``."""


@attrs.frozen
class Plan:
    scopes: tuple[Scope, ...]
    writes: tuple[Write, ...]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    chosen = draw(st.lists(scopes, min_size=2, max_size=5, unique_by=lambda s: s.scope_hash))
    writes = draw(st.lists(
        st.builds(
            Write,
            scope=st.integers(0, len(chosen) - 1),
            words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
            key=st.sampled_from((None, "k1", "k2")),
            idempotency_key=st.sampled_from((None, None, "i1")),
            then=st.sampled_from((None, None, "update", "delete")),
        ),
        min_size=1, max_size=12,
    ))
    return Plan(tuple(chosen), tuple(writes))


@attrs.define
class Written:
    live: list[MemoryRecord] = attrs.field(factory=list)
    deleted: list[MemoryRecord] = attrs.field(factory=list)


async def perform_writes(h: Harness, plan: Plan) -> Written:
    """Run the plan, checking each outcome against what one scope alone predicts."""
    written = Written()
    replays: dict[tuple[str, str], tuple[Write, MemoryRecord]] = {}
    retired: set[tuple[str, str]] = set()
    idempotent = h.capabilities.idempotency
    for write in plan.writes:
        scope = plan.scopes[write.scope]
        idem = write.idempotency_key if idempotent else None
        if idem and (scope.scope_hash, idem) in retired:
            continue  # its first record is deleted; what a retry returns is the provider's call
        earlier = replays.get((scope.scope_hash, idem)) if idem else None
        holder = next((r for r in written.live if r.scope_hash == scope.scope_hash
                       and write.key is not None and r.key == write.key), None)
        call = h.add(write.words, scope=scope, key=write.key, idempotency_key=idem)
        if earlier is not None:
            first_write, first = earlier
            if (first_write.words, first_write.key) == (write.words, write.key):
                replayed = await call
                assert replayed.id == first.id, "an identical idempotent add was not replayed"
            else:
                await expect_error(MemoryConflictError, call,
                                   "an idempotency key reused for another request")
            continue
        if holder is not None:
            await expect_error(MemoryConflictError, call, "add with a key held in the scope")
            continue
        record = await call
        assert record.scope_hash == scope.scope_hash, "add stored the record in another scope"
        if idem:
            replays[(scope.scope_hash, idem)] = (write, record)
        if write.then == "update":
            record = await h.update(record.id, scope, content=f"{write.words} edited")
            assert record.scope_hash == scope.scope_hash, "update moved the record"
        elif write.then == "delete":
            await h.remove(record.id, scope)
            written.deleted.append(record)
            if idem:
                retired.add((scope.scope_hash, idem))
            continue
        written.live.append(record)
    return written


async def check_isolation(h: Harness, plan: Plan) -> None:
    outcome = await perform_writes(h, plan)
    written = outcome.live
    caps = h.capabilities
    # Every scope of the plan, plus each tenant's bare scope: the parent of them all.
    parents = (Scope(tenant) for tenant in sorted({s.tenant_id for s in plan.scopes}))
    probes = (*plan.scopes, *(scope for scope in parents if scope not in plan.scopes))
    for scope in probes:
        own = [record for record in written if record.scope_hash == scope.scope_hash]
        listed = await h.list_all(scope, limit=3)
        assert sorted(r.id for r in listed) == sorted(r.id for r in own), (
            f"list of {scope} returned {[r.id for r in listed]}, owns {[r.id for r in own]}")
        if caps.lexical_search:
            for word in WORDS:
                result = await h.search(word, (scope,), limit=100)
                strays = [hit.record.id for hit in result.hits
                          if hit.record.scope_hash != scope.scope_hash]
                assert not strays, f"search in {scope} returned records of other scopes"
        for record in outcome.deleted:
            await expect_error(MemoryNotFoundError, h.get(record.id, scope),
                               f"get of a deleted record of {record.scope} from {scope}")
        for record in written:
            if record.scope_hash == scope.scope_hash:
                continue
            await expect_error(MemoryNotFoundError, h.get(record.id, scope),
                               f"get of a record of {record.scope} from {scope}")
            if record.key is not None:
                try:
                    found = await h.get_key(record.key, scope)
                except MemoryNotFoundError:
                    pass
                else:
                    assert found.scope_hash == scope.scope_hash, (
                        f"get by key in {scope} returned a record of {found.scope}")
            if caps.history:
                await expect_error(MemoryNotFoundError, h.history(record.id, scope),
                                   f"history of a record of {record.scope} from {scope}")
            await expect_error(MemoryNotFoundError, h.update(record.id, scope, content="stolen"),
                               f"update of a record of {record.scope} from {scope}")
            if caps.compare_and_set:
                await _refused(h.update(record.id, scope, content="stolen",
                                        expected_revision=record.revision))
            await _refused(h.delete(record.id, scope, hard=caps.hard_delete))
    if caps.lexical_search and len({s.tenant_id for s in plan.scopes[:2]}) == 1:
        pair = plan.scopes[:2]
        result = await h.search(" ".join(WORDS), pair, limit=100)
        allowed = {scope.scope_hash for scope in pair}
        assert all(hit.record.scope_hash in allowed for hit in result.hits), (
            "a search over two scopes returned a record of a third")
    for record in written:
        assert_same_record(await h.get(record.id, record.scope), record,
                           "a record after other scopes tried to change it")


async def _refused(call: Awaitable[object]) -> None:
    try:
        await call
    except (MemoryNotFoundError, MemoryConflictError):
        return
    except GovernedMemoryError as exc:
        raise AssertionError(
            f"a write to another scope's record failed with {type(exc).__name__}; "
            "expected not found or conflict") from exc
    raise AssertionError("a write to another scope's record succeeded")


class IsolationTests(ConformanceBase):
    @scenario
    async def test_no_read_or_write_crosses_scopes(self, h: Harness) -> None:
        plan = Plan(
            scopes=(HOME, *NEIGHBOURS),
            writes=tuple(Write(index, f"green tea {index}", "k", None)
                         for index in range(len(NEIGHBOURS) + 1)),
        )
        await check_isolation(h, plan)

    @scenario
    async def test_look_alike_ids_are_different_scopes(self, h: Harness) -> None:
        """Scopes are exact, character for character: ids that differ only in case, in
        width (fullwidth letters) or in Unicode normal form (NFC and NFD) name different
        scopes. Each scope holds its own key ``k`` and its own idempotency key, and no
        read or write of one reaches another. A provider that compares ids after
        ``casefold()`` or ``unicodedata.normalize`` merges users who are not the same."""
        plan = Plan(
            scopes=(HOME, *LOOKALIKES),
            writes=tuple(Write(index, f"green tea {index}", "k", "i1")
                         for index in range(len(LOOKALIKES) + 1)),
        )
        await check_isolation(h, plan)

    def test_scope_isolation_property(self) -> None:
        self._isolation_property(self.conformance_settings.isolation_examples)

    @pytest.mark.slow
    def test_scope_isolation_property_thorough(self) -> None:
        if not self.thorough_requested():
            pytest.skip(THOROUGH_NOT_REQUESTED)
        self._isolation_property(self.conformance_settings.thorough_examples)

    def _isolation_property(self, examples: int) -> None:
        @self.hypothesis_settings(examples)
        @hypothesis.given(plan=plans())
        def isolated(plan: Plan) -> None:
            async def body(provider: MemoryProvider, clock: ManualClock) -> None:
                await check_isolation(Harness(provider, clock), plan)

            self.run_on_provider(body)

        isolated()
