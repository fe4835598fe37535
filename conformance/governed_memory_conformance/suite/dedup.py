"""Dedup (capability ``dedup``): an add identical to a live record returns that record.

Governance stamps ``AddRequest.dedup`` from the profile's ``[write] dedup``; a caller
never sets it. The rule, as the native provider keeps it on every backend:

- ``content_hash``: an add whose content (byte for byte), scope and key (the same key,
  or both without one) equal a *live* record's returns that record, unchanged, instead
  of writing a new one. Live: active or pending review, not expired, valid now
  (``valid_from <= now < invalid_at``); deleted, expired and no longer (or not yet)
  valid records are never the duplicate. When several match, the oldest (lowest id)
  wins. The provider says so with a note on the operation (``ctx.notes``) naming the
  record.
- The match follows the record: an update that changes the content moves it, so the old
  content no longer matches and the new content does.
- An equal add under the key a live record holds is that record (not a key conflict);
  under another key, or without the key, it is a new record.
- A dedup hit with an ``idempotency_key`` records the key like any add: a retry returns
  the same first result, even after the record moved on.
- ``similarity``: as ``content_hash``, and also the nearest live record of the scope
  (same key) at least ``dedup_threshold`` similar by the provider's embedder. Without
  ``vector_search`` there is no similarity to measure, so it is ``content_hash``: only
  identical content is a duplicate.
- ``off`` (the default) never deduplicates.
"""

from __future__ import annotations

from typing import Any

from governed_memory.errors import MemoryConflictError
from governed_memory.records import MemoryRecord, RecordStatus, VersionOperation
from governed_memory.requests import AddRequest, DedupMode
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING
from governed_memory_conformance.suite.concurrency import RACERS, race
from governed_memory_conformance.suite.records import assert_same_record


async def dedup_add(h: Harness, content: str, scope: Scope = HOME,
                    mode: DedupMode = DedupMode.CONTENT_HASH,
                    **fields: Any) -> tuple[MemoryRecord, list[str]]:
    """An add as governance sends it under ``[write] dedup``: the record, and the notes
    the provider left on the operation."""
    ctx = h.ctx(scope.tenant_id)
    record = await h.send(AddRequest(scope=scope, content=content, dedup=mode,
                                             **fields), ctx)
    return record, list(ctx.notes.lines)


def assert_hit(record: MemoryRecord, notes: list[str], original: MemoryRecord,
               what: str) -> None:
    assert record.id == original.id, f"{what}: a new record {record.id} instead of {original.id}"
    assert_same_record(record, original, what)
    assert any(original.id in line for line in notes), (
        f"{what}: a deduplicated add must say so in ctx.notes, naming the record "
        f"(notes: {notes})")


class DedupTests(ConformanceBase):
    @requires("dedup")
    @scenario
    async def test_an_identical_add_returns_the_live_record(self, h: Harness) -> None:
        """The identical add returns the record as stored (its metadata, importance and
        version, not the new request's) and writes nothing; ``off`` never dedups; of
        several identical records the oldest is returned."""
        first = await h.add("the walrus likes herring", metadata={"a": 1})
        h.advance(5)
        hit, notes = await dedup_add(h, "the walrus likes herring", metadata={"b": 2},
                                     importance=0.1)
        assert_hit(hit, notes, first, "an identical add under content_hash")
        assert await h.ids() == [first.id], "a deduplicated add wrote a record"
        if h.capabilities.history:
            assert [v.operation for v in await h.history(first.id)] == [
                VersionOperation.ADD], "a deduplicated add wrote a version"
        second, notes = await dedup_add(h, "the walrus likes herring", mode=DedupMode.OFF)
        assert second.id != first.id, "dedup off deduplicated"
        assert not notes
        again, notes = await dedup_add(h, "the walrus likes herring")
        assert_hit(again, notes, first, "of two identical records, the oldest")

    @requires("dedup")
    @scenario
    async def test_dedup_matches_content_scope_and_key_exactly(self, h: Harness) -> None:
        keyed = await h.add("walrus facts", key="k")
        other_key, notes = await dedup_add(h, "walrus facts", key="other")
        assert other_key.id != keyed.id and other_key.key == "other" and not notes, (
            "an equal add under another key was deduplicated")
        no_key, notes = await dedup_add(h, "walrus facts")
        assert no_key.id != keyed.id and no_key.key is None and not notes, (
            "an equal add without a key was deduplicated to a keyed record")
        same_key, notes = await dedup_add(h, "walrus facts", key="k")
        assert_hit(same_key, notes, keyed, "an equal add under the holder's key")
        await expect_error(MemoryConflictError, dedup_add(h, "other facts", key="k"),
                           "a different add under a held key")
        elsewhere, notes = await dedup_add(h, "walrus facts", SIBLING, key="k")
        assert elsewhere.scope_hash == SIBLING.scope_hash and elsewhere.id != keyed.id, (
            "dedup crossed scopes")
        for variant in ("Walrus facts", "walrus facts ", "walrus  facts"):
            near, notes = await dedup_add(h, variant)
            assert near.content == variant and not notes, (
                f"{variant!r} was deduplicated: content_hash compares exact content")
        nfc, _ = await dedup_add(h, "caf\u00e9 walrus")
        nfd, notes = await dedup_add(h, "cafe\u0301 walrus")
        assert nfd.id != nfc.id and not notes, "NFD content was deduplicated to NFC content"

    @requires("dedup")
    @scenario
    async def test_dedup_never_returns_a_record_that_is_not_live(self, h: Harness) -> None:
        """Deleted, expired, no longer valid and not yet valid records are never the
        duplicate; a record pending review is (it is live and may become visible)."""
        now = h.clock.now()
        deleted = await h.add("deleted walrus")
        await h.remove(deleted.id)
        gone: list[tuple[str, MemoryRecord]] = [("deleted", deleted)]
        if h.capabilities.expiry:
            expired = await h.add("expired walrus", expires_at=now + 5)
            gone.append(("expired", expired))
        gone.append(("no longer valid",
                     await h.add("invalid walrus", valid_from=now - 100, invalid_at=now + 5)))
        gone.append(("not yet valid", await h.add("future walrus", valid_from=now + 1_000)))
        h.advance(5)
        for state, record in gone:
            new, notes = await dedup_add(h, record.content)
            assert new.id != record.id and not notes, (
                f"an add equal to a {state} record returned that record")
            assert new.version == 1 and new.status is RecordStatus.ACTIVE
        pending = await h.add("pending walrus", status=RecordStatus.PENDING_REVIEW)
        hit, notes = await dedup_add(h, "pending walrus")
        assert_hit(hit, notes, pending, "an add equal to a pending record")

    @requires("dedup")
    @scenario
    async def test_dedup_follows_an_update_of_the_content(self, h: Harness) -> None:
        record = await h.add("the walrus sleeps")
        moved = await h.update(record.id, content="the walrus swims")
        old, notes = await dedup_add(h, "the walrus sleeps")
        assert old.id != record.id and not notes, (
            "an add equal to a record's old content returned the record (the content "
            "index was not moved by the update)")
        new, notes = await dedup_add(h, "the walrus swims")
        assert_hit(new, notes, moved, "an add equal to a record's updated content")

    @requires("dedup", "idempotency")
    @scenario
    async def test_a_deduplicated_add_records_its_idempotency_key(self, h: Harness) -> None:
        first = await h.add("the walrus counts fish")
        hit, _ = await dedup_add(h, "the walrus counts fish", idempotency_key="dup-1")
        assert hit.id == first.id
        h.advance(10)
        await h.update(first.id, importance=0.9)
        again, _ = await dedup_add(h, "the walrus counts fish", idempotency_key="dup-1")
        assert_same_record(again, hit, "a retried deduplicated add (the first result)")
        await expect_error(MemoryConflictError,
                           dedup_add(h, "other words", idempotency_key="dup-1"),
                           "a deduplicated add's idempotency key reused for another request")

    @requires("dedup")
    @scenario
    async def test_similarity_dedup_without_vectors_is_exact(self, h: Harness) -> None:
        """``similarity`` always catches identical content; without ``vector_search`` it
        catches nothing else, whatever the threshold."""
        first = await h.add("the walrus dreams of ice")
        hit, notes = await dedup_add(h, "the walrus dreams of ice", mode=DedupMode.SIMILARITY,
                                     dedup_threshold=0.5)
        assert_hit(hit, notes, first, "an identical add under similarity")
        if not h.capabilities.vector_search:
            near, notes = await dedup_add(h, "the walrus dreams of snow",
                                          mode=DedupMode.SIMILARITY, dedup_threshold=0.01)
            assert near.id != first.id and not notes, (
                "similarity without vector_search deduplicated different content")

    @requires("dedup")
    @scenario
    async def test_concurrent_identical_adds_deduplicate_to_one_record(
        self, h: Harness
    ) -> None:
        won, conflicts = await race([dedup_add(h, "the walrus arrives at once")
                                     for _ in range(RACERS)])
        assert conflicts == 0
        assert len({record.id for record, _ in won}) == 1, (
            f"{RACERS} concurrent identical adds under dedup stored "
            f"{len({record.id for record, _ in won})} records")
        assert await h.ids() == [won[0][0].id]
