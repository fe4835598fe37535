"""The provider and the reference model, driven side by side by a hypothesis state
machine: random adds, updates with right and wrong revisions, deletes, expiries and
reads. After every step every scope's listing must match the model."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.records import MemoryRecord, VersionOperation
from governed_memory.requests import DeleteAllRequest, PurgeExpiredRequest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from governed_memory_conformance.base import THOROUGH_NOT_REQUESTED, ConformanceBase
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.model import (
    IdempotentAdd,
    ModelRecord,
    ModelVersion,
    Outcome,
    ReferenceModel,
)
from governed_memory_conformance.scopes import MODEL_SCOPES

T = TypeVar("T")

SCOPES: Final = MODEL_SCOPES
WORDS: Final = ("tea", "coffee", "walk")
PICK: Final = st.integers(min_value=0, max_value=1_000)
REVISION_MODES: Final = st.sampled_from(("current", "none", "stale"))


class ProviderMachine(RuleBasedStateMachine):
    """One example: a fresh provider on its own event loop, and an empty model."""

    def __init__(self, suite: ConformanceBase) -> None:
        super().__init__()
        self.suite = suite
        self.runner = asyncio.Runner()
        self.timeout = suite.conformance_settings.scenario_timeout
        self.clock = ManualClock()
        try:
            provider = self.runner.run(suite.start_provider(self.clock))
        except BaseException:
            self.runner.close()
            raise
        self.h = Harness(provider, self.clock)
        self.caps = self.h.capabilities
        self.model = ReferenceModel()
        self.tags = itertools.count(1)
        self.ids: list[str] = []

    def teardown(self) -> None:
        try:
            self.runner.run(self.suite.finish_provider(self.h.provider))
        finally:
            self.runner.close()

    # -- plumbing -----------------------------------------------------------------------

    def run(self, call: Awaitable[T]) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(self.timeout):
                return await call

        return self.runner.run(bounded())

    def attempt(self, call: Awaitable[T]) -> tuple[Outcome, T | None]:
        try:
            return Outcome.OK, self.run(call)
        except MemoryConflictError:
            return Outcome.CONFLICT, None
        except MemoryNotFoundError:
            return Outcome.NOT_FOUND, None

    def content(self, word: str) -> str:
        """Text with a tag no other content shares, so a search can find exactly it."""
        return f"{word} tag{next(self.tags)}x"

    @property
    def now(self) -> float:
        return self.clock.now()

    def pick(self, index: int) -> ModelRecord:
        return self.model.records[self.ids[index % len(self.ids)]]

    def revision_for(self, record: ModelRecord, mode: str) -> str | None:
        if not self.caps.compare_and_set or mode == "none":
            return None
        return record.revision if mode == "current" else record.stale_revision()

    def ttl(self, seconds: int | None) -> float | None:
        return None if seconds is None or not self.caps.expiry else self.now + seconds

    @staticmethod
    def check(outcome: Outcome, allowed: set[Outcome], doing: str) -> None:
        assert outcome in allowed, (
            f"{doing}: the provider answered {outcome.value}, the contract says "
            f"{' or '.join(sorted(o.value for o in allowed))}")

    def check_record(self, actual: MemoryRecord, expected: ModelRecord, doing: str) -> None:
        got = (actual.id, actual.scope_hash, actual.key, actual.content, actual.version,
               actual.revision, actual.created_at, actual.updated_at, actual.expires_at)
        want = (expected.id, SCOPES[expected.scope].scope_hash, expected.key, expected.content,
                expected.version, expected.revision, expected.created_at, expected.updated_at,
                expected.expires_at)
        assert got == want, f"{doing}: provider has {got}, model has {want}"

    # -- writes -------------------------------------------------------------------------

    @rule(scope=st.integers(0, len(SCOPES) - 1), word=st.sampled_from(WORDS),
          key=st.sampled_from((None, "k1", "k2")), ttl=st.sampled_from((None, None, 0, 5, 30)),
          idempotent=st.booleans())
    def add(self, scope: int, word: str, key: str | None, ttl: int | None,
            idempotent: bool) -> None:
        content = self.content(word)
        expires_at = self.ttl(ttl)
        idem = f"idem-{content}" if idempotent and self.caps.idempotency else None
        allowed = self.model.expect_add(scope, key, self.now)
        outcome, record = self.attempt(self.h.add(content, SCOPES[scope], key=key,
                                                  expires_at=expires_at, idempotency_key=idem))
        self.check(outcome, allowed, f"add with key {key!r}")
        if record is None:
            return
        assert record.id not in self.model.records, "add reused an existing record id"
        expected = ModelRecord(
            id=record.id, scope=scope, key=key, content=content, version=1,
            revision=record.revision, created_at=self.now, updated_at=self.now,
            expires_at=expires_at, revisions=[record.revision],
            history=[ModelVersion(1, VersionOperation.ADD, content, self.now)],
        )
        self.check_record(record, expected, "add")
        self.model.added(expected, self.now)
        self.ids.append(record.id)
        if idem is not None:
            self.model.idempotent_adds.append(
                IdempotentAdd(scope, idem, content, key, expires_at, record.id))

    @precondition(lambda self: bool(self.model.idempotent_adds))
    @rule(pick=PICK, same_request=st.booleans())
    def retry_idempotent_add(self, pick: int, same_request: bool) -> None:
        first = self.model.idempotent_adds[pick % len(self.model.idempotent_adds)]
        record = self.model.records[first.record_id]
        if not record.history_known(self.now):
            return  # the first result may be gone with its record; nothing to predict
        content = first.content if same_request else first.content + " changed"
        outcome, replayed = self.attempt(self.h.add(
            content, SCOPES[first.scope], key=first.record_key, expires_at=first.expires_at,
            idempotency_key=first.key))
        if not same_request:
            self.check(outcome, {Outcome.CONFLICT}, "an idempotency key reused for other content")
            return
        self.check(outcome, {Outcome.OK}, "an identical idempotent add")
        assert replayed is not None
        original = record.history[0]
        assert (replayed.id, replayed.version, replayed.content, replayed.revision) == (
            record.id, 1, original.content, record.revisions[0]), (
            "a retried idempotent add must return the first result")

    @precondition(lambda self: bool(self.ids))
    @rule(pick=PICK, mode=REVISION_MODES, word=st.sampled_from(WORDS),
          expiry=st.sampled_from(("keep", "keep", "clear", 0, 5, 30)))
    def update(self, pick: int, mode: str, word: str, expiry: str | int) -> None:
        record = self.pick(pick)
        expected_revision = self.revision_for(record, mode)
        content = self.content(word)
        fields: dict[str, Any] = {"content": content}
        if self.caps.expiry and expiry == "clear":
            fields["clear_expires_at"] = True
        elif self.caps.expiry and isinstance(expiry, int):
            fields["expires_at"] = self.now + expiry
        allowed = self.model.expect_update(record, expected_revision, self.now)
        outcome, updated = self.attempt(self.h.update(
            record.id, SCOPES[record.scope], expected_revision=expected_revision, **fields))
        self.check(outcome, allowed, f"update ({mode} revision) of a record in state "
                                     f"{self.describe(record)}")
        if updated is None:
            return
        record.version += 1
        record.revision = updated.revision
        record.revisions.append(updated.revision)
        record.content = content
        record.updated_at = self.now
        if "clear_expires_at" in fields:
            record.expires_at = None
        elif "expires_at" in fields:
            record.expires_at = fields["expires_at"]
        record.history.append(ModelVersion(record.version, VersionOperation.UPDATE, content,
                                           self.now))
        self.check_record(updated, record, "update")

    @precondition(lambda self: bool(self.ids))
    @rule(pick=PICK, mode=REVISION_MODES, hard=st.booleans())
    def delete(self, pick: int, mode: str, hard: bool) -> None:
        if not (self.caps.soft_delete or self.caps.hard_delete):
            return
        hard = (hard and self.caps.hard_delete) or not self.caps.soft_delete
        record = self.pick(pick)
        expected_revision = self.revision_for(record, mode)
        allowed = self.model.expect_delete(record, expected_revision, hard, self.now)
        outcome, result = self.attempt(self.h.delete(
            record.id, SCOPES[record.scope], expected_revision=expected_revision, hard=hard))
        kind = "hard" if hard else "soft"
        self.check(outcome, allowed, f"{kind} delete ({mode} revision) of a record in state "
                                     f"{self.describe(record)}")
        if result is None:
            return
        assert (result.record_id, result.hard) == (record.id, hard)
        if hard:
            record.erased, record.uncertain = True, False
            return
        record.deleted = True
        record.version += 1
        record.updated_at = self.now
        record.history.append(ModelVersion(record.version, VersionOperation.DELETE,
                                           record.content, self.now))
        if result.revision is not None:
            record.revision = result.revision
            record.revisions.append(result.revision)

    @rule(seconds=st.sampled_from((1, 5, 30)))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule(scope=st.integers(0, len(SCOPES) - 1))
    def purge_expired(self, scope: int) -> None:
        if not self.caps.purge_expired:
            return
        low, high = self.model.purge_bounds(scope, self.now)
        deleted, after = 0, None
        for _ in range(1_000):
            request = PurgeExpiredRequest(scope=SCOPES[scope], limit=2, after=after)
            page = self.run(self.h.send(request, self.h.ctx()))
            assert 0 <= page.deleted <= 2
            deleted += page.deleted
            after = page.next_cursor
            if after is None:
                break
        assert low <= deleted <= high, (
            f"purge_expired removed {deleted}; the model expects {low}..{high}")
        self.model.purged(scope, self.now)

    @rule(scope=st.integers(0, len(SCOPES) - 1))
    def delete_all(self, scope: int) -> None:
        if not self.caps.delete_all:
            return
        low, high = self.model.delete_all_bounds(scope)
        count = self.run(self.h.send(DeleteAllRequest(scope=SCOPES[scope]),
                                                    self.h.ctx()))
        assert low <= count <= high, f"delete_all counted {count}; the model expects {low}..{high}"
        self.model.erased_scope(scope)

    # -- reads --------------------------------------------------------------------------

    @precondition(lambda self: bool(self.ids))
    @rule(pick=PICK)
    def get(self, pick: int) -> None:
        record = self.pick(pick)
        scope = SCOPES[record.scope]
        outcome, found = self.attempt(self.h.get(record.id, scope))
        if record.visible(self.now):
            self.check(outcome, {Outcome.OK}, "get of a visible record")
            assert found is not None
            self.check_record(found, record, "get")
        else:
            self.check(outcome, {Outcome.NOT_FOUND},
                       f"get of a record in state {self.describe(record)}")
        if record.key is not None:
            holder = self.model.key_holder(record.scope, record.key, self.now)
            outcome, found = self.attempt(self.h.get_key(record.key, scope))
            if holder is None:
                self.check(outcome, {Outcome.NOT_FOUND}, "get by a key no live record holds")
            else:
                assert found is not None, "get by key missed the key's live holder"
                self.check_record(found, holder, "get by key")

    @precondition(lambda self: bool(self.ids))
    @rule(pick=PICK)
    def history(self, pick: int) -> None:
        if not self.caps.history:
            return
        record = self.pick(pick)
        if record.erased:
            outcome, _ = self.attempt(self.h.history(record.id, SCOPES[record.scope]))
            self.check(outcome, {Outcome.NOT_FOUND}, "history of an erased record")
            return
        if not record.history_known(self.now):
            return
        versions = self.run(self.h.history(record.id, SCOPES[record.scope]))
        actual = [ModelVersion(v.record.version, v.operation, v.record.content, v.recorded_at)
                  for v in versions]
        assert actual == record.history, f"history is {actual}, the model has {record.history}"

    @precondition(lambda self: bool(self.ids))
    @rule(pick=PICK)
    def search(self, pick: int) -> None:
        if not self.caps.lexical_search:
            return
        record = self.pick(pick)
        tag = record.content.split()[-1]
        result = self.run(self.h.search(tag, SCOPES, limit=10))
        found = [hit.record.id for hit in result.hits]
        expected = [record.id] if record.visible(self.now) else []
        assert found == expected, (
            f"search for a record's unique tag found {found}; the model expects {expected} "
            f"(record state {self.describe(record)})")

    @invariant()
    def listings_match_the_model(self) -> None:
        for index, scope in enumerate(SCOPES):
            listed = self.run(self.h.list_all(scope, limit=3))
            expected = self.model.visible(index, self.now)
            assert [r.id for r in listed] == [r.id for r in expected], (
                f"list of scope {index} returned {[r.id for r in listed]}, the model has "
                f"{[r.id for r in expected]}")
            for actual, wanted in zip(listed, expected, strict=True):
                self.check_record(actual, wanted, f"list of scope {index}")

    def describe(self, record: ModelRecord) -> str:
        states = [name for name, on in (
            ("deleted", record.deleted), ("erased", record.erased),
            ("replaced-while-expired", record.uncertain),
            ("expired", record.expired(self.now))) if on]
        return "+".join(states) or "visible"


class StatefulTests(ConformanceBase):
    def test_provider_agrees_with_the_reference_model(self) -> None:
        settings = self.conformance_settings
        self._run_machine(settings.machine_examples, settings.machine_steps)

    @pytest.mark.slow
    def test_provider_agrees_with_the_reference_model_thorough(self) -> None:
        if not self.thorough_requested():
            pytest.skip(THOROUGH_NOT_REQUESTED)
        settings = self.conformance_settings
        self._run_machine(settings.thorough_examples, settings.machine_steps)

    def _run_machine(self, examples: int, steps: int) -> None:
        run_state_machine_as_test(
            # Hypothesis takes any zero-argument factory here, as its docstring says.
            lambda: ProviderMachine(self),  # type: ignore[arg-type]
            settings=self.hypothesis_settings(examples, stateful_step_count=steps),
        )
