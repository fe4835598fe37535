"""GovernedStore: LangGraph's store contract over governed operations."""

from __future__ import annotations

import asyncio

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryScopeError,
    MemoryType,
    MemoryValidationError,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import InMemoryEventSink
from governed_memory.sync import SyncMemoryManager
from governed_memory_langgraph import (
    GovernedStore,
    NamespaceRule,
    PrincipalNotBoundError,
    record_key,
)
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph_support import ADMIN, ALICE, BOB, CAROL_OTHER_TENANT

ALICE_SCOPE = Scope("acme", user_id="alice")


async def test_put_get_update_delete_are_governed_operations(
        store: GovernedStore, manager: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    mine = store.bind(ALICE)
    await mine.aput(("memories",), "tea", {"content": "Alice likes green tea", "mood": 3})
    item = await mine.aget(("memories",), "tea")
    assert item is not None
    assert (item.namespace, item.key) == (("memories",), "tea")
    assert item.value == {"content": "Alice likes green tea", "mood": 3}

    # The record is an ordinary governed memory in Alice's user scope: the content is the
    # memory's text, the rest of the value its metadata, the key derived from both.
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("memories",), "tea"))
    assert record.content == "Alice likes green tea"
    assert record.metadata["mood"] == 3
    assert record.provenance.source_type == "langgraph"

    await mine.aput(("memories",), "tea", {"content": "Alice likes black tea"})
    updated = await mine.aget(("memories",), "tea")
    assert updated is not None and updated.value == {"content": "Alice likes black tea"}
    assert updated.created_at == item.created_at
    assert updated.updated_at >= item.updated_at
    versions = await manager.history(ALICE, ALICE_SCOPE, record.id)
    assert [v.record.version for v in versions] == [1, 2]  # an update, not a second record

    await mine.adelete(("memories",), "tea")
    assert await mine.aget(("memories",), "tea") is None
    await mine.adelete(("memories",), "tea")  # deleting what is gone is a no-op
    assert await mine.alist_namespaces() == []

    types = sink.types()
    for expected in ("memory.write.committed", "memory.read.completed"):
        assert expected in types
    assert {e.principal_id for e in sink.events} == {ALICE.principal_id}


async def test_a_missing_item_is_none_and_its_read_completes(
        store: GovernedStore, sink: InMemoryEventSink) -> None:
    assert await store.bind(ALICE).aget(("memories",), "nothing") is None
    assert sink.types()[-1] == "memory.read.completed"


async def test_every_call_needs_a_bound_principal(store: GovernedStore) -> None:
    with pytest.raises(PrincipalNotBoundError):
        await store.aget(("memories",), "k")
    with pytest.raises(PrincipalNotBoundError):
        await store.aput(("memories",), "k", {"content": "x"})
    assert isinstance(PrincipalNotBoundError("x"), MemoryScopeError)


async def test_the_tenant_comes_from_the_principal_never_the_namespace(
        store: GovernedStore, manager: GovernedMemoryManager) -> None:
    await store.bind(CAROL_OTHER_TENANT).aput(("acme", "alice"), "k", {"content": "planted"})
    # Nothing reached acme: the namespace ("acme", "alice") lives in Carol's own scope.
    assert (await manager.list(ALICE, ALICE_SCOPE)).items == ()
    assert await store.bind(ALICE).aget(("acme", "alice"), "k") is None
    assert await store.bind(CAROL_OTHER_TENANT).alist_namespaces() == [("acme", "alice")]
    with pytest.raises(MemoryValidationError):
        NamespaceRule(("{tenant_id}",))


async def test_a_user_label_is_checked_against_the_principal(manager: GovernedMemoryManager
                                                            ) -> None:
    store = GovernedStore(manager, namespaces=[("users", "{user_id}", "...")])
    await store.bind(ALICE).aput(("users", "alice", "notes"), "k", {"content": "mine"})
    with pytest.raises(MemoryScopeError):
        await store.bind(ALICE).aput(("users", "bob", "notes"), "k", {"content": "planted"})
    with pytest.raises(MemoryScopeError):
        await store.bind(BOB).aget(("users", "alice", "notes"), "k")
    with pytest.raises(MemoryScopeError):
        await store.bind(BOB).asearch(("users", "alice"), query="mine")
    # A prefix that names no user reaches the caller's own scope only.
    assert await store.bind(BOB).asearch(("users",)) == []
    assert [i.key for i in await store.bind(ALICE).asearch(("users",))] == ["k"]
    assert await store.bind(BOB).alist_namespaces() == []
    assert await store.bind(ALICE).alist_namespaces() == [("users", "alice", "notes")]
    with pytest.raises(MemoryValidationError, match="matches no rule"):
        await store.bind(ALICE).aput(("elsewhere",), "k", {"content": "x"})


async def test_a_shared_namespace_is_read_by_users_and_written_by_admins(
        manager: GovernedMemoryManager) -> None:
    store = GovernedStore(manager, namespaces=[
        NamespaceRule(("handbook", "..."), fixed={"project_id": "support"}, per_user=False,
                      memory_type="fact"),
        ("...",),
    ])
    with pytest.raises(MemoryScopeError, match="memory:admin"):
        await store.bind(ALICE).aput(("handbook",), "refunds", {"content": "Refunds in 30 days"})
    await store.bind(ADMIN).aput(("handbook",), "refunds", {"content": "Refunds in 30 days"})
    await store.bind(ALICE).aput(("notes",), "n1", {"content": "Alice's own note"})

    for reader in (ALICE, BOB):
        item = await store.bind(reader).aget(("handbook",), "refunds")
        assert item is not None and item.value["content"] == "Refunds in 30 days"
    shared = Scope("acme", project_id="support")
    record = await manager.get(ALICE, shared, key=record_key(("handbook",), "refunds"))
    assert record.memory_type is MemoryType.FACT
    assert await store.bind(ALICE).alist_namespaces() == [("handbook",), ("notes",)]
    assert await store.bind(BOB).alist_namespaces() == [("handbook",)]
    hits = await store.bind(BOB).asearch((), query="refunds days note")
    assert [(i.namespace, i.key) for i in hits] == [(("handbook",), "refunds")]


async def test_index_fields_decide_the_searched_text(manager: GovernedMemoryManager) -> None:
    store = GovernedStore(manager, index={"fields": ["title"]}).bind(ALICE)
    await store.aput(("docs",), "a", {"title": "Quarterly report", "body": "sales grew"})
    await store.aput(("docs",), "b", {"title": "Holiday plan", "body": "quarterly trip"},
                     index=["body"])
    await store.aput(("docs",), "c", {"title": "Quarterly secret", "body": "x"}, index=False)
    assert [i.key for i in await store.asearch(("docs",), query="quarterly")] in (
        ["a", "b"], ["b", "a"])
    assert [i.key for i in await store.asearch(("docs",), query="sales")] == []
    assert [i.key for i in await store.asearch(("docs",), query="holiday")] == []
    # Not indexed, still stored and listed by a search without a query.
    assert [i.key for i in await store.asearch(("docs",))] == ["a", "b", "c"]
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("docs",), "a"))
    assert record.content == "Quarterly report"
    assert record.metadata["body"] == "sales grew"


async def test_whole_value_when_there_is_no_content_field(store: GovernedStore,
                                                          manager: GovernedMemoryManager) -> None:
    mine = store.bind(ALICE)
    value = {"name": "Alice", "languages": ["French", "Basque"], "age": 41}
    await mine.aput(("profile",), "me", value)
    assert (await mine.aget(("profile",), "me")).value == value  # type: ignore[union-attr]
    hits = await mine.asearch(("profile",), query="basque")
    assert [h.key for h in hits] == ["me"] and hits[0].score is not None
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("profile",), "me"))
    assert "Basque" in record.content


async def test_search_filters_in_the_datastore_and_after(store: GovernedStore) -> None:
    mine = store.bind(ALICE)
    await mine.aput(("m",), "1", {"content": "tea in the morning", "kind": "drink", "n": 1})
    await mine.aput(("m",), "2", {"content": "tea at night", "kind": "drink", "n": 5})
    await mine.aput(("m",), "3", {"content": "tea cakes", "kind": "food", "n": 9})
    await mine.aput(("m", "deep"), "4", {"content": "tea leaves", "kind": "drink", "n": 7})

    def keys(items: list) -> set[str]:  # type: ignore[type-arg]
        return {i.key for i in items}

    assert keys(await mine.asearch(("m",), query="tea", filter={"kind": "drink"})) == {
        "1", "2", "4"}
    assert keys(await mine.asearch(("m",), query="tea",
                                   filter={"kind": "drink", "n": {"$gt": 2}})) == {"2", "4"}
    assert keys(await mine.asearch(("m",), filter={"n": {"$lte": 5}})) == {"1", "2"}
    assert keys(await mine.asearch(("m", "deep"), query="tea")) == {"4"}
    assert keys(await mine.asearch(("m",), filter={"n": {"$ne": 1}, "kind": "drink"})) == {
        "2", "4"}
    assert keys(await mine.asearch(("m",), filter={"missing": None})) == {"1", "2", "3", "4"}
    assert keys(await mine.asearch(("m",), filter={"n": True})) == set()  # JSON types
    page = await mine.asearch(("m",), limit=2, offset=1)
    assert [i.key for i in page] == ["2", "3"]
    with pytest.raises(MemoryValidationError, match="operator"):
        await mine.asearch(("m",), filter={"n": {"$regex": "x"}})
    with pytest.raises(MemoryValidationError, match="at most 100"):
        await mine.asearch(("m",), query="tea", limit=90, offset=20)


async def test_list_namespaces_conditions_and_depth(store: GovernedStore) -> None:
    mine = store.bind(ALICE)
    for namespace in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"),
                      ("a", "b", "f"), ("a", "c", "f")]:
        await mine.aput(namespace, "k", {"content": "x"})
    assert await mine.alist_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert await mine.alist_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert await mine.alist_namespaces(prefix=("a", "*", "f")) == [
        ("a", "b", "f"), ("a", "c", "f")]
    assert await mine.alist_namespaces(limit=2, offset=1) == [("a", "b", "d", "e"),
                                                             ("a", "b", "d", "i")]
    assert await store.bind(BOB).alist_namespaces() == []


async def test_ttl_is_an_expiry(manager: GovernedMemoryManager, clock: ManualClock) -> None:
    store = GovernedStore(manager, ttl={"default_ttl": 10}).bind(ALICE)
    await store.aput(("m",), "short", {"content": "brief"}, ttl=1)
    await store.aput(("m",), "default", {"content": "ten minutes"})
    await store.aput(("m",), "forever", {"content": "kept"}, ttl=None)
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("m",), "short"))
    assert record.expires_at == clock.now() + 60
    clock.advance(61)
    assert await store.aget(("m",), "short") is None
    assert await store.aget(("m",), "default") is not None  # reads never extend it
    clock.advance(540)
    assert await store.aget(("m",), "default") is None
    assert [i.key for i in await store.asearch(("m",))] == ["forever"]
    # A put after expiry writes a new record under the same key.
    await store.aput(("m",), "short", {"content": "again"})
    assert (await store.aget(("m",), "short")).value == {"content": "again"}  # type: ignore[union-attr]
    # A put without a ttl clears an expiry the item had.
    await store.aput(("m",), "forever", {"content": "kept"}, ttl=5)
    await store.aput(("m",), "forever", {"content": "kept"}, ttl=None)
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("m",), "forever"))
    assert record.expires_at is None
    with pytest.raises(MemoryValidationError):
        await store.aput(("m",), "bad", {"content": "x"}, ttl=-1)


def test_configuration_the_store_cannot_honour_is_refused(
        sync_manager: SyncMemoryManager) -> None:
    with pytest.raises(MemoryConfigurationError, match="embeds"):
        GovernedStore(sync_manager, index={"dims": 3, "embed": "fake", "fields": ["x"]})
    with pytest.raises(MemoryConfigurationError, match="purge_expired"):
        GovernedStore(sync_manager, ttl={"sweep_interval_minutes": 5})
    with pytest.raises(MemoryConfigurationError, match="never writes"):
        GovernedStore(sync_manager, ttl={"refresh_on_read": True})
    with pytest.raises(MemoryConfigurationError):
        GovernedStore(object())  # type: ignore[arg-type]


async def test_values_the_store_cannot_keep_are_refused(store: GovernedStore) -> None:
    mine = store.bind(ALICE)
    with pytest.raises(MemoryValidationError, match="reserved"):
        await mine.aput(("m",), "k", {"langgraph:item": 2, "content": "x"})
    with pytest.raises(MemoryValidationError):
        await mine.aput(("m",), "k", {"content": "x", "when": object()})
    with pytest.raises(InvalidNamespaceError):
        await mine.abatch([PutOp((), "k", {"content": "x"})])
    with pytest.raises(InvalidNamespaceError):
        await mine.abatch([PutOp(("a.b",), "k", {"content": "x"})])
    with pytest.raises(InvalidNamespaceError):
        await mine.abatch([PutOp(("langgraph", "x"), "k", {"content": "x"})])


async def test_a_batch_reads_before_it_writes_and_keeps_the_last_put(
        store: GovernedStore) -> None:
    mine = store.bind(ALICE)
    await mine.aput(("m",), "k", {"content": "before"})
    results = await mine.abatch([
        PutOp(("m",), "k", {"content": "first"}),
        GetOp(("m",), "k"),
        PutOp(("m",), "k", {"content": "last"}),
        SearchOp(("m",), query="before"),
    ])
    assert results[1].value == {"content": "before"}  # type: ignore[union-attr]
    assert [i.key for i in results[3]] == ["k"]  # type: ignore[union-attr]
    assert (await mine.aget(("m",), "k")).value == {"content": "last"}  # type: ignore[union-attr]


async def test_a_lost_race_is_re_read_not_overwritten(store: GovernedStore,
                                                      manager: GovernedMemoryManager) -> None:
    mine = store.bind(ALICE)
    await mine.aput(("m",), "k", {"content": "v1"})
    real_update = manager.update
    raced = False

    async def update_after_a_rival(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal raced
        if not raced:
            raced = True
            await real_update(ALICE, ALICE_SCOPE, args[2],
                              expected_revision=kwargs["expected_revision"], content="rival")
        return await real_update(*args, **kwargs)

    manager.update = update_after_a_rival  # type: ignore[method-assign]
    try:
        await mine.aput(("m",), "k", {"content": "v2"})
    finally:
        del manager.update
    assert (await mine.aget(("m",), "k")).value == {"content": "v2"}  # type: ignore[union-attr]
    record = await manager.get(ALICE, ALICE_SCOPE, key=record_key(("m",), "k"))
    assert record.version == 3  # v1, the rival, then v2 over the rival's revision


async def test_a_key_held_by_a_pending_record_is_a_conflict(store: GovernedStore,
                                                           manager: GovernedMemoryManager,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    async def always_taken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise MemoryConflictError("the key is already used by a record in this scope")

    monkeypatch.setattr(manager, "add", always_taken)
    with pytest.raises(MemoryConflictError, match="awaiting review"):
        await store.bind(ALICE).aput(("m",), "k", {"content": "x"})


def test_the_sync_api_over_the_sync_facade(sync_store: GovernedStore,
                                           sync_manager: SyncMemoryManager) -> None:
    mine = sync_store.bind(ALICE)
    mine.put(("memories",), "tea", {"content": "Alice likes green tea"})
    assert mine.get(("memories",), "tea").value == {  # type: ignore[union-attr]
        "content": "Alice likes green tea"}
    assert [i.key for i in mine.search(("memories",), query="tea")] == ["tea"]
    assert mine.list_namespaces() == [("memories",)]
    mine.delete(("memories",), "tea")
    assert mine.get(("memories",), "tea") is None
    # The async API over the sync facade runs the same logic off the caller's loop.
    asyncio.run(mine.aput(("memories",), "seat", {"content": "window seat"}))
    assert asyncio.run(mine.aget(("memories",), "seat")) is not None
    assert sync_manager.list(ALICE, ALICE_SCOPE).items[0].content == "window seat"


async def test_sync_calls_over_the_async_manager_go_to_its_loop(store: GovernedStore) -> None:
    mine = store.bind(ALICE)
    await mine.aput(("m",), "k", {"content": "from the loop"})
    found: list[object] = []

    def worker() -> None:  # a sync node of an async graph run: another thread
        mine.put(("m",), "j", {"content": "from a thread"})
        found.append(mine.get(("m",), "k"))

    await asyncio.to_thread(worker)
    assert found[0] is not None
    assert (await mine.aget(("m",), "j")) is not None
    with pytest.raises(RuntimeError, match="deadlock"):
        mine.get(("m",), "k")  # on the loop's own thread


def test_sync_calls_over_the_async_manager_without_its_loop_are_refused(
        clock: ManualClock, sink: InMemoryEventSink) -> None:
    from langgraph_support import native_manager

    store = GovernedStore(native_manager(clock, sink)).bind(ALICE)
    with pytest.raises(MemoryConfigurationError, match="SyncMemoryManager"):
        store.get(("m",), "k")


async def test_records_the_store_did_not_write_are_not_items(
        store: GovernedStore, manager: GovernedMemoryManager) -> None:
    await manager.add(ALICE, ALICE_SCOPE, "tea written by the app directly")
    mine = store.bind(ALICE)
    await mine.aput(("m",), "k", {"content": "tea from the graph"})
    assert [i.key for i in await mine.asearch((), query="tea")] == ["k"]
    assert [i.key for i in await mine.asearch(())] == ["k"]
    assert await mine.alist_namespaces() == [("m",)]


async def test_a_namespace_placed_elsewhere_now_is_not_listed_from_its_old_scope(
        manager: GovernedMemoryManager) -> None:
    before = GovernedStore(manager).bind(ALICE)
    await before.aput(("kb",), "k", {"content": "moved"})
    after = GovernedStore(manager, namespaces=[
        NamespaceRule(("kb",), per_user=False), ("...",)]).bind(ALICE)
    assert await after.aget(("kb",), "k") is None
    assert await after.asearch((), query="moved") == []
    assert await after.alist_namespaces() == []
