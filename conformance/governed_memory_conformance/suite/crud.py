"""Create, read, update: round trips, detached copies, timestamps, keys, not-found."""

from __future__ import annotations

from governed_memory.capabilities import Capabilities
from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.records import MemoryType, Provenance, RecordStatus, Visibility, content_hash
from governed_memory.requests import GetRequest

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING
from governed_memory_conformance.suite.records import (
    assert_fields,
    assert_same_record,
    record_fields,
    vandalize,
)

GHOST_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
"""A well-formed id no provider has issued to this test."""


class LifecycleTests(ConformanceBase):
    @scenario
    async def test_started_provider_reports_health_and_capabilities(self, h: Harness) -> None:
        provider = h.provider
        assert isinstance(provider.name, str) and provider.name, "provider.name is empty"
        caps = provider.capabilities()
        assert isinstance(caps, Capabilities), "capabilities() must return Capabilities"
        assert 1 <= caps.max_page_size <= 100, (
            f"max_page_size {caps.max_page_size} is outside 1..100")
        health = await provider.health()
        assert health.ok, f"a started provider reports unhealthy: {health.detail}"


class CrudTests(ConformanceBase):
    @scenario
    async def test_add_then_get_round_trips_every_field(self, h: Harness) -> None:
        now = h.clock.now()
        metadata = {"source": "chat", "tags": ["tea", "green"],
                    "nested": {"n": 1, "ok": True, "none": None, "ratio": 0.25}}
        provenance = Provenance(source_type="chat", source_id="message-1", session_id="s1",
                                run_id="run-1", agent_id="assistant")
        added = await h.add(
            "Alice prefers green tea", memory_type=MemoryType.PREFERENCE, key="drink",
            metadata=metadata, provenance=provenance, visibility=Visibility.SHARED,
            importance=0.75, entity_ids=("alice", "green-tea"), valid_from=now - 100,
            invalid_at=now + 10_000, expires_at=now + 3_600,
        )
        assert added.scope == HOME and added.scope_hash == HOME.scope_hash
        assert added.content == "Alice prefers green tea"
        assert added.content_hash == content_hash("Alice prefers green tea")
        assert added.memory_type is MemoryType.PREFERENCE
        assert added.key == "drink"
        assert dict(added.metadata) == metadata
        for name, value in provenance.as_dict().items():
            assert getattr(added.provenance, name) == value, f"provenance.{name} was not kept"
        assert added.visibility is Visibility.SHARED
        assert added.importance == 0.75
        assert added.entity_ids == ("alice", "green-tea")
        assert (added.valid_from, added.invalid_at, added.expires_at) == (
            now - 100, now + 10_000, now + 3_600)
        assert added.version == 1
        assert isinstance(added.revision, str) and added.revision
        assert added.status is RecordStatus.ACTIVE
        assert added.created_at == added.updated_at == now, (
            "created_at and updated_at must be the operation's time (ctx.now)")

        assert_same_record(await h.get(added.id), added, "get by id")
        assert_same_record(await h.get_key("drink"), added, "get by key")
        listed = await h.list_all()
        assert [record.id for record in listed] == [added.id]
        assert_same_record(listed[0], added, "list")

    @scenario
    async def test_reads_return_detached_copies(self, h: Harness) -> None:
        added = await h.add("detached", key="k", metadata={"tags": ["a"], "nested": {"k": "v"}},
                            entity_ids=("e1",))
        # A deep, plain snapshot: nothing a provider shares with storage can reach it.
        pristine = record_fields(await h.get(added.id))
        first = await h.get(added.id)
        second = await h.get(added.id)
        assert first is not second, "two reads returned the same object"
        handed_out = [added, first, second, await h.get_key("k"), *await h.list_all()]
        if h.capabilities.lexical_search:
            handed_out.extend((await h.search("detached")).records)
        for record in handed_out:
            vandalize(record)
        assert_fields(await h.get(added.id), pristine,
                      "after a caller changed records it was handed")

    @scenario
    async def test_update_keeps_created_at_and_moves_updated_at(self, h: Harness) -> None:
        added = await h.add("version one", key="k", metadata={"a": 1}, importance=0.2)
        h.advance(60)
        updated = await h.update(added.id, content="version two")
        assert updated.id == added.id
        assert updated.version == 2
        assert updated.revision != added.revision, "an update must issue a new revision"
        assert updated.created_at == added.created_at, "created_at changed on update"
        assert updated.updated_at == added.created_at + 60, "updated_at is not ctx.now"
        assert updated.content == "version two"
        assert updated.content_hash == content_hash("version two")
        assert (updated.key, dict(updated.metadata), updated.importance) == ("k", {"a": 1}, 0.2), (
            "fields the update left unset must keep their values")
        assert_same_record(await h.get(added.id), updated, "get after update")

        h.advance(5)
        again = await h.update(added.id, metadata={"b": 2}, memory_type=MemoryType.FACT)
        assert again.version == 3
        assert again.content == "version two"
        assert dict(again.metadata) == {"b": 2}, "metadata given to update replaces the old"
        assert again.memory_type is MemoryType.FACT
        assert again.created_at == added.created_at
        assert again.updated_at == added.created_at + 65

    @scenario
    async def test_add_with_a_live_key_conflicts_and_writes_nothing(self, h: Harness) -> None:
        first = await h.add("one", key="k")
        await expect_error(MemoryConflictError, h.add("two", key="k"),
                           "add with a key a live record of the scope holds")
        assert await h.ids() == [first.id], "the refused add wrote something"
        assert_same_record(await h.get_key("k"), first, "the key's holder after a refused add")
        elsewhere = await h.add("two", key="k", scope=SIBLING)
        assert elsewhere.key == "k", "a key is unique per scope, not across scopes"

    @scenario
    async def test_missing_records_are_not_found(self, h: Harness) -> None:
        await h.add("present")
        await expect_error(MemoryNotFoundError, h.get(GHOST_ID), "get of an unknown id")
        await expect_error(MemoryNotFoundError, h.get_key("no-such-key"), "get of an unknown key")
        await expect_error(MemoryNotFoundError, h.update(GHOST_ID, content="x"),
                           "update of an unknown id without expected_revision")
        await expect_error(MemoryNotFoundError, h.delete(GHOST_ID),
                           "delete of an unknown id without expected_revision")
        if h.capabilities.history:
            await expect_error(MemoryNotFoundError, h.history(GHOST_ID),
                               "history of an unknown id")

    @scenario
    async def test_get_needs_exactly_one_of_id_or_key(self, h: Harness) -> None:
        added = await h.add("present", key="k")
        for request in (GetRequest(scope=HOME), GetRequest(scope=HOME, record_id=added.id,
                                                           key="k")):
            await expect_error(MemoryValidationError, h.send(request, h.ctx()),
                               f"get with record_id={request.record_id!r}, key={request.key!r}")

    @scenario
    async def test_pending_review_records_are_invisible_to_reads(self, h: Harness) -> None:
        pending = await h.add("awaiting review zebra", key="pending",
                              status=RecordStatus.PENDING_REVIEW)
        assert pending.status is RecordStatus.PENDING_REVIEW
        await h.assert_invisible(pending, "a pending_review record")
        if h.capabilities.history:
            versions = await h.history(pending.id)
            assert [v.record.status for v in versions] == [RecordStatus.PENDING_REVIEW], (
                "history shows a pending_review record as it is")

    @scenario
    async def test_supersession_is_kept_by_add_and_update(self, h: Harness) -> None:
        """Extraction records that a newer fact replaces an older one: the new record
        names the old in ``supersedes``, the old one gets ``superseded_by`` (with
        ``invalid_at``) in an update, and later updates keep both."""
        older = await h.add("Alice lives in Lyon", memory_type=MemoryType.FACT)
        h.advance(10)
        newer = await h.add("Alice lives in Paris", memory_type=MemoryType.FACT,
                            supersedes=older.id)
        assert newer.supersedes == older.id, "add dropped supersedes"
        assert (await h.get(newer.id)).supersedes == older.id
        marked = await h.update(older.id, superseded_by=newer.id, invalid_at=h.clock.now())
        assert (marked.superseded_by, marked.invalid_at) == (newer.id, h.clock.now()), (
            "update dropped superseded_by or invalid_at")
        assert_same_record(await h.get(older.id), marked, "get after marking supersession")
        later = await h.update(older.id, content="Alice lived in Lyon", importance=0.9)
        assert later.superseded_by == newer.id, "a later update dropped superseded_by"
        assert later.invalid_at == marked.invalid_at, "a later update dropped invalid_at"
        touched = await h.update(newer.id, metadata={"checked": True})
        assert touched.supersedes == older.id, "an update dropped supersedes"

    @scenario
    async def test_supersession_links_name_a_record_of_the_scope(self, h: Harness) -> None:
        """``supersedes`` (add) and ``superseded_by`` (update) name a record of the same
        scope, in any status but not expired; a link to nothing, to another scope's
        record or to an expired one is refused with ``MemoryValidationError`` and writes
        nothing."""
        elsewhere = await h.add("a record of the sibling scope", scope=SIBLING)
        for missing in ("01JZZZZZZZZZZZZZZZZZZZZZZZ", elsewhere.id):
            await expect_error(MemoryValidationError,
                               h.add("Alice lives in Paris", supersedes=missing),
                               f"add(supersedes={missing!r})")
        assert [r.id for r in await h.list_all()] == [], "a refused add wrote a record"
        kept = await h.add("Alice lives in Lyon")
        for missing in ("01JZZZZZZZZZZZZZZZZZZZZZZZ", elsewhere.id):
            await expect_error(MemoryValidationError,
                               h.update(kept.id, superseded_by=missing),
                               f"update(superseded_by={missing!r})")
        assert_same_record(await h.get(kept.id), kept, "after refused supersession links")
        if h.capabilities.expiry:
            # An expired record is gone for every read and write, purged or not yet (a
            # purge may run at any moment): it is no record to link to.
            expired = await h.add("Alice lived in Nice", expires_at=h.clock.now() + 1)
            h.advance(1)
            await expect_error(MemoryValidationError, h.add("Alice lives in Paris",
                                                            supersedes=expired.id),
                               "add(supersedes=<an expired record, not yet purged>)")
            await expect_error(MemoryValidationError,
                               h.update(kept.id, superseded_by=expired.id),
                               "update(superseded_by=<an expired record, not yet purged>)")
            assert_same_record(await h.get(kept.id), kept, "after a link to an expired record")
        if h.capabilities.soft_delete:
            # Any status counts, a tombstone included: an old fact may be long retired.
            retired = await h.add("Alice lived in Brest")
            await h.delete(retired.id)
            linked = await h.add("Alice lives in Paris", supersedes=retired.id)
            assert linked.supersedes == retired.id
