"""Concurrent writes into one scope: key uniqueness and idempotency hold under a race.

``GovernedMemoryManager.add_many`` runs up to 32 adds into one scope at once (its
``concurrency``), and so does any application with more than one request in flight. A
provider that checks a key or an idempotency key, awaits its storage, and only then
writes lets every racer pass the check: 32 records under one key, or 32 copies of one
idempotent write. The checks belong in the same atomic step as the write (a lock, a
transaction, a unique index), and these tests race exactly that window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Final, TypeVar

from governed_memory.errors import MemoryConflictError
from governed_memory.records import RecordStatus
from governed_memory.requests import ApproveRequest

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.scopes import HOME
from governed_memory_conformance.suite.records import assert_same_record
from governed_memory_conformance.suite.review import reviewer

T = TypeVar("T")

RACERS: Final = 32
"""As many adds as ``add_many`` runs into one scope at once."""


async def race(calls: Sequence[Awaitable[T]]) -> tuple[list[T], int]:
    """Run ``calls`` at once: what succeeded, and how many were refused as conflicts.
    Any other error fails the test (a race is no excuse for a storage error)."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    won: list[T] = []
    conflicts = 0
    for outcome in outcomes:
        if isinstance(outcome, MemoryConflictError):
            conflicts += 1
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            won.append(outcome)
    return won, conflicts


class ConcurrencyTests(ConformanceBase):
    @scenario
    async def test_concurrent_adds_with_one_key_store_exactly_one(self, h: Harness) -> None:
        """32 adds racing for one key: exactly one record holds it, every other add is a
        ``MemoryConflictError``; again once that record is gone, and (with ``expiry``)
        once it expired: freeing an expired holder's key is part of the same atomic
        step."""
        for round_ in range(3):
            if round_ == 2:
                if not h.capabilities.expiry:
                    return
                await h.add("a holder about to expire", key="k",
                            expires_at=h.clock.now() + 1)
                h.advance(1)
            won, conflicts = await race([h.add(f"racer {round_}.{n}", key="k")
                                         for n in range(RACERS)])
            assert len(won) == 1, (
                f"{len(won)} of {RACERS} concurrent adds with one key succeeded "
                "(is the key checked outside the write's atomic step?)")
            assert conflicts == RACERS - 1
            winner = won[0]
            assert [record.id for record in await h.list_all()] == [winner.id], (
                "the scope lists other records than the one key holder")
            assert (await h.get_key("k")).id == winner.id
            await h.remove(winner.id)

    @requires("idempotency")
    @scenario
    async def test_concurrent_idempotent_adds_write_once(self, h: Harness) -> None:
        """32 identical adds with one idempotency key (a client retrying while its first
        attempt is in flight): one record, and every add answers with it. 32 different
        adds with one idempotency key: one record, the rest conflict."""
        won, conflicts = await race([h.add("written once", idempotency_key="idem-race")
                                     for _ in range(RACERS)])
        assert conflicts == 0, "an identical idempotent add was refused as a conflict"
        assert len({record.id for record in won}) == 1, (
            f"{len({record.id for record in won})} records for one idempotency key "
            "(is the key checked outside the write's atomic step?)")
        for record in won[1:]:
            assert_same_record(record, won[0], "a concurrent idempotent add")
        first = won[0].id
        assert await h.ids() == [first]

        won, conflicts = await race([h.add(f"claim {n}", idempotency_key="idem-other")
                                     for n in range(RACERS)])
        assert len(won) == 1 and conflicts == RACERS - 1, (
            f"{len(won)} of {RACERS} different adds with one idempotency key succeeded")
        assert sorted(await h.ids()) == sorted([first, won[0].id])

    @requires("idempotency")
    @scenario
    async def test_concurrent_idempotent_updates_write_one_version(self, h: Harness) -> None:
        """32 identical updates with one idempotency key write one version."""
        record = await h.add("v1")
        won, conflicts = await race([h.update(record.id, content="v2",
                                              idempotency_key="upd-race")
                                     for _ in range(RACERS)])
        assert conflicts == 0, "an identical idempotent update was refused as a conflict"
        assert {(r.version, r.revision) for r in won} == {(2, won[0].revision)}, (
            "concurrent identical idempotent updates wrote more than one version")
        current = await h.get(record.id)
        assert (current.version, current.content) == (2, "v2")
        if h.capabilities.history:
            assert len(await h.history(record.id)) == 2

    @requires("idempotency", "soft_delete")
    @scenario
    async def test_concurrent_idempotent_deletes_answer_alike(self, h: Harness) -> None:
        """32 identical soft deletes with one idempotency key: one tombstone, and every
        one of them answers with the first result (none "not found")."""
        record = await h.add("to be deleted once")
        won, conflicts = await race([h.delete(record.id, idempotency_key="del-race")
                                     for _ in range(RACERS)])
        assert conflicts == 0
        assert all(result == won[0] for result in won), (
            "concurrent retries of one delete answered differently")
        if h.capabilities.history:
            assert len(await h.history(record.id)) == 2, "more than one tombstone version"

    @requires("review")
    @scenario
    async def test_concurrent_review_decisions_decide_once(self, h: Harness) -> None:
        """32 approvals of one pending record race: one approves it (one new version),
        every other is a ``MemoryConflictError`` (it is no longer pending); with one
        idempotency key (and ``idempotency``), every one answers with the first result."""
        reviewer(h)  # the accessor answers when review is declared
        pending = await h.add("held for review", status=RecordStatus.PENDING_REVIEW)
        request = ApproveRequest(scope=HOME, record_id=pending.id)
        won, conflicts = await race([h.send(request, h.ctx()) for _ in range(RACERS)])
        assert (len(won), conflicts) == (1, RACERS - 1), (
            f"{len(won)} of {RACERS} concurrent approvals of one record succeeded")
        if h.capabilities.history:
            assert len(await h.history(pending.id)) == 2
        if not h.capabilities.idempotency:
            return
        held = await h.add("held again", status=RecordStatus.PENDING_REVIEW)
        keyed = ApproveRequest(scope=HOME, record_id=held.id, idempotency_key="approve-race")
        won, conflicts = await race([h.send(keyed, h.ctx()) for _ in range(RACERS)])
        assert conflicts == 0, "an identical idempotent approve was refused as a conflict"
        assert {(r.version, r.revision) for r in won} == {(2, won[0].revision)}
