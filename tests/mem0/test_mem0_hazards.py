"""Each hazard of the mem0 notes, reproduced on raw Mem0 and shown contained through
the governed API (``GovernedMemoryManager``), on both clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from actors import ADMIN, ALICE_SCOPE, BOB_SCOPE, GLOBEX
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.scope import Scope
from governed_memory_mem0 import Mem0MemoryProvider, build_mem0_provider
from governed_memory_mem0.clients import GM_KEY, history_db_texts
from mem0_support import local_config, platform_config, wire_server

SECRET = "the vault code is 4471-zebra-quartz"


class Harness:
    """A manager over one Mem0 provider, plus raw views of what Mem0 holds."""

    def __init__(self, kind: str, directory: Path, manager: GovernedMemoryManager,
                 provider: Mem0MemoryProvider, sink: InMemoryEventSink,
                 clock: ManualClock) -> None:
        self.kind = kind
        self.directory = directory
        self.manager = manager
        self.provider = provider
        self.sink = sink
        self.clock = clock

    def raw_texts(self) -> list[str]:
        """Every text Mem0 keeps anywhere: vector store payloads and history."""
        if self.kind == "platform":
            return wire_server().state.texts()
        return self._files_text()

    def _files_text(self) -> list[str]:
        """The bytes of every file Mem0 and the adapter wrote, decoded loosely: a scan
        of the files themselves, not of what their APIs choose to show."""
        return [path.read_bytes().decode("utf-8", "replace")
                for path in self.directory.rglob("*") if path.is_file()]

    def raw_namespaces(self) -> set[str]:
        if self.kind == "platform":
            state = wire_server().state
            return {m["user_id"] for m in state.memories.values()
                    if str(m.get("user_id", "")).startswith(self.prefix)}
        memory = self.provider.client.memory  # type: ignore[attr-defined]
        return {payload["user_id"] for payload in memory.vector_store.docstore.values()}

    @property
    def prefix(self) -> str:
        return self.provider._config.namespace_prefix

    def raw_count(self) -> int:
        return len(self.raw_namespaces_items())

    def raw_namespaces_items(self) -> list[Any]:
        if self.kind == "platform":
            state = wire_server().state
            return [m for m in state.memories.values()
                    if str(m.get("user_id", "")).startswith(self.prefix + ":")]
        memory = self.provider.client.memory  # type: ignore[attr-defined]
        return list(memory.vector_store.docstore.values())


@pytest.fixture(params=["local", "platform"])
async def h(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    clock = ManualClock()
    sink = InMemoryEventSink()
    if request.param == "local":
        config = local_config(tmp_path)
    else:
        config = platform_config(wire_server(), tmp_path, timeout_seconds=1.0)
    provider = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:
        yield Harness(request.param, tmp_path, manager, provider, sink, clock)


# -- 1. wildcards ------------------------------------------------------------------------


async def test_a_wildcard_never_reaches_mem0(h: Harness) -> None:
    alice = await h.manager.add(ADMIN, ALICE_SCOPE, "alice likes tea")
    await h.manager.add(ADMIN, BOB_SCOPE, "bob likes tea")
    for bad in ({"user_id": "*"}, {"project_id": "*"}, {"user_id": ""}):
        with pytest.raises(MemoryValidationError):
            Scope("acme", **bad)
    with pytest.raises(MemoryValidationError):
        await h.manager.delete_user(ADMIN, "acme", "*")
    # What Mem0 was told: namespaces derived from scope hashes, never a scope value.
    assert h.raw_namespaces() == {f"{h.prefix}:{ALICE_SCOPE.scope_hash}",
                                  f"{h.prefix}:{BOB_SCOPE.scope_hash}"}
    found = await h.manager.search(ADMIN, ALICE_SCOPE, "tea")
    assert [hit.record.id for hit in found.hits] == [alice.id]


async def test_the_platform_wildcard_hazard_is_real_on_raw_mem0() -> None:
    """Reproduced: on the Platform contract, ``"*"`` in a filter matches every user."""
    from mem0 import MemoryClient
    from mem0_support import API_KEY

    server = wire_server()
    raw = MemoryClient(api_key=API_KEY, host=server.url)
    raw.add([{"role": "user", "content": "tenant one secret"}], user_id="raw-u1", infer=False)
    raw.add([{"role": "user", "content": "tenant two secret"}], user_id="raw-u2", infer=False)
    leaked = raw.search("secret", filters={"user_id": "*"}, top_k=100, threshold=0.0)
    users = {item["user_id"] for item in leaked["results"]}
    assert {"raw-u1", "raw-u2"} <= users
    raw.delete_all(user_id="raw-u1")
    raw.delete_all(user_id="raw-u2")


async def test_an_item_of_another_scope_is_dropped_and_reported(h: Harness) -> None:
    """If Mem0 ever returns another scope's memory for a namespace (a filter that
    matched too much), the adapter hands it on under its own scope and the manager drops
    it with a scope_violation event: it never comes back as Alice's."""
    await h.manager.add(ADMIN, ALICE_SCOPE, "alice likes green tea")
    bob = await h.manager.add(ADMIN, BOB_SCOPE, "bob likes green tea")
    marker = {"id": bob.id, "scope": BOB_SCOPE.dimensions(), "scope_hash": bob.scope_hash,
              "revision": bob.revision, "version": 1, "memory_type": "note"}
    # Plant bob's memory in alice's namespace, as a leaking filter would surface it.
    h.provider.client.add(f"{h.prefix}:{ALICE_SCOPE.scope_hash}", bob.content, marker)
    h.sink.clear()
    found = await h.manager.search(ADMIN, ALICE_SCOPE, "green tea", limit=10)
    assert all(hit.record.scope_hash == ALICE_SCOPE.scope_hash for hit in found.hits)
    assert "bob" not in " ".join(hit.record.content for hit in found.hits)
    assert "memory.read.scope_violation" in h.sink.types()


# -- 2. cross-scope access by id -----------------------------------------------------------


async def test_ids_of_another_scope_are_not_found(h: Harness) -> None:
    alice = await h.manager.add(ADMIN, ALICE_SCOPE, "alice's private note")
    mem0_id = h.provider.ledger.record(alice.scope_hash, alice.id).mem0_id  # type: ignore[union-attr]
    # The hazard: Mem0 itself hands the memory to anyone holding its id.
    assert h.provider.client.get(mem0_id) is not None
    for scope in (BOB_SCOPE, GLOBEX, Scope("acme", project_id="p")):
        with pytest.raises(MemoryNotFoundError):
            await h.manager.get(ADMIN_OF[scope.tenant_id], scope, alice.id)
        with pytest.raises(MemoryNotFoundError):
            await h.manager.update(ADMIN_OF[scope.tenant_id], scope, alice.id, content="mine")
        with pytest.raises(MemoryNotFoundError):
            await h.manager.delete(ADMIN_OF[scope.tenant_id], scope, alice.id, hard=True)
        with pytest.raises(MemoryNotFoundError):
            await h.manager.history(ADMIN_OF[scope.tenant_id], scope, alice.id)
        # Neither the governed id nor Mem0's own id opens it from another scope.
        with pytest.raises((MemoryNotFoundError, MemoryValidationError)):
            await h.manager.get(ADMIN_OF[scope.tenant_id], scope, mem0_id)
    assert (await h.manager.get(ADMIN, ALICE_SCOPE, alice.id)).content == "alice's private note"


# -- 3. duplicate writes -------------------------------------------------------------------


async def test_duplicate_writes_are_deduplicated_by_idempotency_key(h: Harness) -> None:
    before = h.raw_count()
    first = await h.manager.add(ADMIN, ALICE_SCOPE, "pay the invoice", idempotency_key="k1")
    again = await h.manager.add(ADMIN, ALICE_SCOPE, "pay the invoice", idempotency_key="k1")
    assert again.id == first.id and again.revision == first.revision
    assert h.raw_count() == before + 1, "a retried write stored the text twice in Mem0"
    with pytest.raises(MemoryConflictError):
        await h.manager.add(ADMIN, ALICE_SCOPE, "pay another invoice", idempotency_key="k1")
    assert h.raw_count() == before + 1


async def test_raw_mem0_stores_the_same_text_twice(tmp_path: Path) -> None:
    """Reproduced: with infer=False Mem0 itself does not deduplicate."""
    provider = build_mem0_provider(local_config(tmp_path), ManualClock())
    await provider.start()
    try:
        memory = provider.client.memory  # type: ignore[attr-defined]
        for _ in range(2):
            memory.add([{"role": "user", "content": "same"}], user_id="raw", infer=False)
        listed = memory.get_all(filters={"user_id": "raw"})["results"]
        assert [item["memory"] for item in listed] == ["same", "same"]
    finally:
        await provider.close()


# -- 4. deleted text surviving in history ----------------------------------------------------


async def test_raw_mem0_keeps_deleted_text_in_its_history(tmp_path: Path) -> None:
    """Reproduced: Mem0's delete leaves the text readable in its history database."""
    provider = build_mem0_provider(local_config(tmp_path), ManualClock())
    await provider.start()
    try:
        memory = provider.client.memory  # type: ignore[attr-defined]
        added = memory.add([{"role": "user", "content": SECRET}], user_id="raw", infer=False)
        memory.delete(added["results"][0]["id"])
        assert memory.get(added["results"][0]["id"]) is None
        assert SECRET in history_db_texts(str(tmp_path / "mem0-history.db"))
    finally:
        await provider.close()


async def test_hard_delete_erases_the_text_from_mem0_and_its_history(h: Harness) -> None:
    record = await h.manager.add(ADMIN, ALICE_SCOPE, SECRET)
    await h.manager.update(ADMIN, ALICE_SCOPE, record.id, content=SECRET + " (rotated)")
    kept = await h.manager.add(ADMIN, ALICE_SCOPE, "an unrelated note stays")
    assert any(SECRET in text for text in h.raw_texts())
    await h.manager.delete(ADMIN, ALICE_SCOPE, record.id, hard=True)
    assert not any(SECRET in text for text in h.raw_texts()), (
        "the erased text survives in Mem0's vector store, its history or the ledger")
    assert any("an unrelated note stays" in text for text in h.raw_texts())
    assert (await h.manager.get(ADMIN, ALICE_SCOPE, kept.id)).content == kept.content


async def test_soft_delete_keeps_history_until_the_record_is_erased(h: Harness) -> None:
    record = await h.manager.add(ADMIN, ALICE_SCOPE, SECRET)
    await h.manager.delete(ADMIN, ALICE_SCOPE, record.id)
    with pytest.raises(MemoryNotFoundError):
        await h.manager.get(ADMIN, ALICE_SCOPE, record.id)
    versions = await h.manager.history(ADMIN, ALICE_SCOPE, record.id)
    assert [v.operation.value for v in versions] == ["add", "delete"]
    await h.manager.delete(ADMIN, ALICE_SCOPE, record.id, hard=True)
    assert not any(SECRET in text for text in h.raw_texts())


async def test_delete_user_erases_every_namespace_of_the_user(h: Harness) -> None:
    scopes = [ALICE_SCOPE, ALICE_SCOPE.replace(session_id="s1"),
              Scope("acme", user_id="alice"), ALICE_SCOPE.replace(agent_id="helper")]
    for n, scope in enumerate(scopes):
        record = await h.manager.add(ADMIN, scope, f"{SECRET} #{n}")
        if n == 0:
            await h.manager.update(ADMIN, scope, record.id, content=f"{SECRET} updated")
    bob = await h.manager.add(ADMIN, BOB_SCOPE, "bob's note")
    not_alice = await h.manager.add(ADMIN, Scope("acme", agent_id="alice"), "agent alice")
    receipt = await h.manager.delete_user(ADMIN, "acme", "alice")
    assert receipt.verify()
    assert receipt.counts["records"] == len(scopes)
    assert receipt.counts["mem0_history_entries_left"] == 0
    assert not any(SECRET in text for text in h.raw_texts())
    for scope in scopes:
        assert (await h.manager.list(ADMIN, scope)).items == ()
    assert (await h.manager.get(ADMIN, BOB_SCOPE, bob.id)).content == "bob's note"
    assert (await h.manager.get(ADMIN, not_alice.scope, not_alice.id)).content == "agent alice"


# -- 5. concurrent writes --------------------------------------------------------------------


async def test_concurrent_writes_lose_nothing(h: Harness) -> None:
    before = h.raw_count()
    records = await asyncio.gather(*(
        h.manager.add(ADMIN, ALICE_SCOPE, f"parallel note {n}") for n in range(30)))
    assert len({r.id for r in records}) == 30
    assert h.raw_count() == before + 30, "Mem0 lost concurrent writes"
    target = records[0]
    outcomes = await asyncio.gather(*(
        h.manager.update(ADMIN, ALICE_SCOPE, target.id, content=f"edit {n}",
                         expected_revision=target.revision) for n in range(10)),
        return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(winners) == 1, "compare-and-set let more than one writer through"
    assert all(isinstance(o, MemoryConflictError) for o in outcomes if o not in winners)
    final = await h.manager.get(ADMIN, ALICE_SCOPE, target.id)
    assert final.content == winners[0].content and final.version == 2


async def test_providers_on_one_embedded_store_share_one_write_lock(tmp_path: Path) -> None:
    clock = ManualClock()
    first = build_mem0_provider(local_config(tmp_path), clock)
    second = build_mem0_provider(local_config(tmp_path), clock)
    assert first._lock is second._lock
    other = build_mem0_provider(local_config(tmp_path / "elsewhere"), clock)
    assert other._lock is not first._lock


# -- timeouts: reconcile, never replay ----------------------------------------------------------


@pytest.fixture
async def platform(tmp_path: Path) -> AsyncIterator[Harness]:
    clock = ManualClock()
    sink = InMemoryEventSink()
    provider = build_mem0_provider(
        platform_config(wire_server(), tmp_path, timeout_seconds=0.5), clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:
        yield Harness("platform", tmp_path, manager, provider, sink, clock)


async def test_a_write_that_timed_out_but_landed_is_reconciled_not_replayed(
    platform: Harness
) -> None:
    wire_server().state.fail_next("POST /v3/memories/add/", "apply_then_hang", hang_s=1.5)
    record = await platform.manager.add(ADMIN, ALICE_SCOPE, "landed late", idempotency_key="t1")
    assert platform.provider.reconciled_writes == 1
    assert platform.raw_count() == 1, "the adapter replayed a write that had landed"
    assert (await platform.manager.get(ADMIN, ALICE_SCOPE, record.id)).content == "landed late"
    again = await platform.manager.add(ADMIN, ALICE_SCOPE, "landed late", idempotency_key="t1")
    assert again.id == record.id and platform.raw_count() == 1


async def test_a_write_that_timed_out_and_did_not_land_is_reported_then_retried(
    platform: Harness
) -> None:
    from governed_memory.errors import MemoryUnavailableError

    wire_server().state.fail_next("POST /v3/memories/add/", "hang", hang_s=1.0)
    with pytest.raises(MemoryUnavailableError) as caught:
        await platform.manager.add(ADMIN, ALICE_SCOPE, "lost in transit", idempotency_key="t2")
    assert "not stored" in str(caught.value)
    assert platform.raw_count() == 0
    record = await platform.manager.add(ADMIN, ALICE_SCOPE, "lost in transit",
                                        idempotency_key="t2")
    assert platform.raw_count() == 1
    assert (await platform.manager.get(ADMIN, ALICE_SCOPE, record.id)).content == record.content


async def test_an_update_that_timed_out_but_landed_is_recorded(platform: Harness) -> None:
    record = await platform.manager.add(ADMIN, ALICE_SCOPE, "before")
    mem0_id = platform.provider.ledger.record(record.scope_hash, record.id).mem0_id  # type: ignore[union-attr]
    wire_server().state.fail_next(f"PUT /v1/memories/{mem0_id}/", "apply_then_hang", hang_s=1.5)
    updated = await platform.manager.update(ADMIN, ALICE_SCOPE, record.id, content="after")
    assert updated.version == 2
    current = await platform.manager.get(ADMIN, ALICE_SCOPE, record.id)
    assert (current.content, current.revision) == ("after", updated.revision)


# -- errors carry no provider detail ---------------------------------------------------------


@pytest.mark.parametrize("status", [401, 413, 429, 500, 503])
async def test_platform_errors_map_to_the_tree_without_leaking(
    platform: Harness, status: int
) -> None:
    from governed_memory.errors import GovernedMemoryError as GovernedError
    from mem0_support import API_KEY

    secret_content = "content that must not leak 9931"
    wire_server().state.fail_next("POST /v3/memories/add/", status)
    with pytest.raises(GovernedError) as caught:
        await platform.manager.add(ADMIN, ALICE_SCOPE, secret_content)
    error = caught.value
    text = f"{error} {error!r} {error.__cause__!r} {error.__context__!r}"
    events = json.dumps([str(event) for event in platform.sink.events])
    for leak in (API_KEY, "127.0.0.1", wire_server().url, secret_content, "scripted"):
        assert leak not in text and leak not in events
    expected = {401: "configuration", 413: "storage", 429: "unavailable", 500: "unavailable",
                503: "unavailable"}[status]
    assert error.code == expected
    assert platform.raw_count() == 0


ADMIN_OF = {"acme": ADMIN, "globex": ADMIN.__class__(
    "svc:admin-globex", ADMIN.kind, "globex", permissions=ADMIN.permissions)}
_ = GM_KEY


# -- crash between Mem0 and the ledger --------------------------------------------------------


def _crash_config(kind: str, tmp_path: Path) -> dict[str, Any]:
    return (local_config(tmp_path) if kind == "local"
            else platform_config(wire_server(), tmp_path))


def _die_before_the_ledger(*args: object, **kwargs: object) -> None:
    """Stands in for the ledger commit: the process dies after Mem0 took the write."""
    raise RuntimeError("process died between Mem0 and the ledger")


@pytest.mark.parametrize("kind", ["local", "platform"])
async def test_a_write_mem0_took_before_a_crash_is_recovered_on_start(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_memory.errors import GovernedMemoryError as GovernedError

    config = _crash_config(kind, tmp_path)
    clock = ManualClock()
    crashed = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(crashed, clock=clock) as manager:
        monkeypatch.setattr(crashed._writes, "_commit_new", _die_before_the_ledger)
        with pytest.raises(GovernedError):
            await manager.add(ADMIN, ALICE_SCOPE, "taken by mem0, not yet recorded",
                              idempotency_key="crash-1")
        assert (await manager.list(ADMIN, ALICE_SCOPE)).items == ()
    restarted = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(restarted, clock=clock) as manager:
        listed = (await manager.list(ADMIN, ALICE_SCOPE)).items
        assert [r.content for r in listed] == ["taken by mem0, not yet recorded"]
        retry = await manager.add(ADMIN, ALICE_SCOPE, "taken by mem0, not yet recorded",
                                  idempotency_key="crash-1")
        assert retry.id == listed[0].id, "the retry wrote the recovered record again"
        assert restarted.reconciled_writes == 1


async def test_the_qdrant_wildcard_hazard_is_real_on_raw_mem0(tmp_path: Path) -> None:
    """Reproduced in process: on Qdrant, ``{"user_id": "*"}`` matches every user."""
    config = local_config(tmp_path, ledger_path=":memory:",
                          vector_store={"provider": "qdrant", "path": ":memory:"})
    provider = build_mem0_provider(config, ManualClock())
    await provider.start()
    try:
        memory = provider.client.memory  # type: ignore[attr-defined]
        for user in ("raw-u1", "raw-u2"):
            memory.add([{"role": "user", "content": f"{user} secret"}], user_id=user,
                       infer=False)
        leaked = memory.search("secret", filters={"user_id": "*"}, top_k=10, threshold=0.0)
        assert {item["user_id"] for item in leaked["results"]} == {"raw-u1", "raw-u2"}
    finally:
        await provider.close()


@pytest.mark.parametrize("kind", ["local", "platform"])
async def test_a_soft_delete_mem0_took_before_a_crash_is_recorded(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_memory.errors import GovernedMemoryError as GovernedError

    config = _crash_config(kind, tmp_path)
    clock = ManualClock()
    crashed = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(crashed, clock=clock) as manager:
        record = await manager.add(ADMIN, ALICE_SCOPE, "soon deleted")
        monkeypatch.setattr(crashed._reconciler, "commit", _die_before_the_ledger)
        with pytest.raises(GovernedError):
            await manager.delete(ADMIN, ALICE_SCOPE, record.id, idempotency_key="del-1")
    restarted = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(restarted, clock=clock) as manager:
        with pytest.raises(MemoryNotFoundError):
            await manager.get(ADMIN, ALICE_SCOPE, record.id)
        history = await manager.history(ADMIN, ALICE_SCOPE, record.id)
        assert [v.operation.value for v in history] == ["add", "delete"]
        replay = await manager.delete(ADMIN, ALICE_SCOPE, record.id, idempotency_key="del-1")
        assert (replay.hard, replay.version) == (False, 2)


async def test_concurrent_writes_on_embedded_qdrant_lose_nothing(tmp_path: Path) -> None:
    """The store that loses writes raw (below) keeps all of them behind the adapter."""
    config = local_config(tmp_path, vector_store={"provider": "qdrant",
                                                  "path": str(tmp_path / "qdrant")})
    clock = ManualClock()
    provider = build_mem0_provider(config, clock)
    async with GovernedMemoryManager(provider, clock=clock) as manager:
        written = await asyncio.gather(*(
            manager.add(ADMIN, ALICE_SCOPE, f"parallel note {n}") for n in range(40)))
        listed = await manager.list(ADMIN, ALICE_SCOPE, limit=100)
        assert {r.id for r in listed.items} == {r.id for r in written}
        assert len(list(provider.client.items(f"gm:{ALICE_SCOPE.scope_hash}"))) == 40


@pytest.mark.slow
async def test_raw_async_mem0_loses_concurrent_writes_on_embedded_qdrant(
    tmp_path: Path
) -> None:
    """Reproduced (hazard 5): ``AsyncMemory.add`` racing on one embedded Qdrant store fails
    or drops writes (Mem0's shared history connection: "cannot start a transaction
    within a transaction"). Racy by nature, so behind ``slow``; it has reproduced on
    every run on the development machine (300 writes, 1 to 5 lost)."""
    from governed_memory_mem0 import HashingEmbedder
    from governed_memory_mem0.embedding import Mem0EmbedderBridge
    from mem0 import AsyncMemory

    memory = AsyncMemory.from_config({
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "race", "path": str(tmp_path / "q"), "on_disk": True,
            "embedding_model_dims": 64}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "embedder": {"provider": "openai", "config": {"api_key": "unused",
                                                      "embedding_dims": 64}},
        "history_db_path": str(tmp_path / "history.db")})
    memory.embedding_model = Mem0EmbedderBridge(HashingEmbedder(64))
    try:
        outcomes = await asyncio.gather(*(
            memory.add([{"role": "user", "content": f"note {n}"}], user_id="u", infer=False)
            for n in range(300)), return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        listed = memory.vector_store.list(filters={"user_id": "u"}, top_k=10_000)
        rows = listed[0] if listed and isinstance(listed[0], list) else listed
        assert failed or len(rows) < 300, "the race did not trigger on this run"
    finally:
        memory.vector_store.client.close()
