"""``[write] dedup`` makes an identical add return the existing record (and says so in
the trail); the review queue lists what waits for a reviewer (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from actors import ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryScopeError
from governed_memory.events import InMemoryEventSink
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles import loads_profile
from governed_memory.records import RecordStatus
from native_support import config_for

PROFILE = """
spec_version = 1
id = "dedup-test"
version = "1.0.0"
[provider]
name = "{provider}"
config = {config}
[write]
dedup = "{mode}"
{stores}
"""

HASHING = """
[stores.embedder]
kind = "hashing"
config = { dimension = 64 }
[retrieval]
modes = ["lexical", "vector"]
"""

REVIEWER = Principal("user:rita", PrincipalKind.USER, "acme", user_id="alice",
                     permissions=frozenset({Permission.READ, Permission.REVIEW}))


def _manager(tmp_path: Path, mode: str, sink: InMemoryEventSink, clock: ManualClock,
             backend: str = "sqlite") -> GovernedMemoryManager:
    stores = HASHING if mode == "similarity" else ""
    spec = loads_profile(PROFILE.format(provider="native", config='{ backend = "memory" }',
                                        mode=mode, stores=stores))
    return GovernedMemoryManager.from_profile(
        spec, sinks=[sink], clock=clock,
        provider_config_overrides=config_for(backend, tmp_path))


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_an_identical_add_returns_the_canonical_record(tmp_path: Path,
                                                             backend: str) -> None:
    sink, clock = InMemoryEventSink(), ManualClock()
    async with _manager(tmp_path, "content_hash", sink, clock, backend) as manager:
        first = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea")
        sink.clear()
        again = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea")
        assert again.id == first.id and again.revision == first.revision
        committed = sink.events[-1]
        assert committed.type == "memory.write.committed"
        assert committed.record_ids == (first.id,)
        assert f"deduplicated: same content as record {first.id}" in committed.reasons
        assert [r.id for r in (await manager.list(ALICE, ALICE_SCOPE)).items] == [first.id]
        # not a duplicate: another scope, another key, or content that differs
        other = await manager.add(ALICE, ALICE_SCOPE.replace(session_id="s9"),
                                  "Alice likes green tea")
        keyed = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea", key="tea")
        assert len({first.id, other.id, keyed.id}) == 3
        # a record that is no longer live is no canonical record
        await manager.update(ALICE, ALICE_SCOPE, first.id, invalid_at=clock.now())
        clock.advance(1)
        fresh = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea")
        assert fresh.id != first.id
        # an idempotent retry of a deduplicated add gets the same answer
        one = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea",
                                idempotency_key="k1")
        two = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea",
                                idempotency_key="k1")
        assert one.id == two.id == fresh.id


async def test_similarity_dedup_uses_the_profile_embedder(tmp_path: Path) -> None:
    sink, clock = InMemoryEventSink(), ManualClock()
    async with _manager(tmp_path, "similarity", sink, clock) as manager:
        first = await manager.add(ALICE, ALICE_SCOPE, "Alice likes green tea")
        # different bytes, the same words: the hashing embedder sees the same memory
        again = await manager.add(ALICE, ALICE_SCOPE, "alice LIKES green tea!")
        assert again.id == first.id
        assert any(reason.startswith("deduplicated: similarity")
                   for reason in sink.events[-1].reasons)
        unlike = await manager.add(ALICE, ALICE_SCOPE, "Bob repairs bicycles on Sundays")
        assert unlike.id != first.id


def test_dedup_is_refused_where_it_cannot_work(tmp_path: Path) -> None:
    with pytest.raises(MemoryConfigurationError, match=r"write\.dedup"):  # no embedder
        loads_profile(PROFILE.format(provider="native", config='{ backend = "memory" }',
                                     mode="similarity", stores=""))
    config = (f'{{ client = "local", ledger_path = "{tmp_path / "ledger.db"}", '
              f'history_db_path = "{tmp_path / "history.db"}", '
              f'vector_store = {{ provider = "faiss", path = "{tmp_path / "faiss"}" }}, '
              'embedder = { name = "deterministic", dimension = 64 } }')
    spec = loads_profile(PROFILE.format(provider="mem0", config=config, mode="content_hash",
                                        stores=""))
    with pytest.raises(MemoryConfigurationError, match="capability 'dedup'"):
        GovernedMemoryManager.from_profile(spec)


async def test_the_review_queue_is_a_governed_read_for_reviewers(tmp_path: Path) -> None:
    sink, clock = InMemoryEventSink(), ManualClock()
    async with _manager(tmp_path, "off", sink, clock) as manager:
        provider: Any = manager._provider
        from governed_memory.operation_context import OperationContext
        from governed_memory.requests import AddRequest

        held = await provider.add(AddRequest(scope=ALICE_SCOPE, content="from a web page",
                                             status=RecordStatus.PENDING_REVIEW),
                                  OperationContext(operation_id="op_seed", principal=ALICE,
                                                   now=clock.now()))
        await manager.add(ALICE, ALICE_SCOPE, "an ordinary memory")
        sink.clear()
        page = await manager.list_pending(REVIEWER, ALICE_SCOPE)
        assert [r.id for r in page.items] == [held.id]
        assert sink.types() == ["memory.read.requested", "memory.read.completed"]
        assert sink.events[-1].operation == "list_pending"
        assert sink.events[-1].record_ids == (held.id,)
        with pytest.raises(MemoryScopeError, match="memory:review"):
            await manager.list_pending(ALICE, ALICE_SCOPE)  # a writer is no reviewer
        with pytest.raises(MemoryScopeError):
            await manager.list_pending(REVIEWER, BOB_SCOPE)  # another user's queue
        await manager.approve(REVIEWER, ALICE_SCOPE, held.id)
        assert (await manager.list_pending(REVIEWER, ALICE_SCOPE)).items == ()
