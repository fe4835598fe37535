"""The governed pipeline end to end: events in order, decisions, spans, verification."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE, BOB_SCOPE, GLOBEX
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryPolicyDeniedError,
    MemoryScopeError,
    MemoryStorageError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.records import Page, RecordStatus, SearchHit, SearchResult
from governed_memory.requests import AddRequest, GetRequest, ListRequest, SearchRequest
from governed_memory.scope import Scope
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

MARKER = "ZEBRA-MARKER-7731"


def types(sink: InMemoryEventSink) -> list[str]:
    return sink.types()


async def test_every_operation_emits_requested_then_outcome(
    manager: GovernedMemoryManager, sink: InMemoryEventSink, clock: ManualClock
) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "likes tea", memory_type="preference")
    assert types(sink) == ["memory.write.requested", "memory.write.committed"]
    committed = sink.events[-1]
    assert committed.record_ids == (record.id,)
    assert committed.versions == (1,)
    assert committed.content_hashes == (record.content_hash,)
    assert committed.decision_id and committed.decision_id.startswith("dec_")
    assert committed.scope_hash == ALICE_SCOPE.scope_hash
    assert committed.operation_id == sink.events[0].operation_id

    calls: list[tuple[str, Any]] = [
        ("get", manager.get(ALICE, ALICE_SCOPE, record.id)),
        ("list", manager.list(ALICE, ALICE_SCOPE)),
        ("search", manager.search(ALICE, ALICE_SCOPE, "tea")),
        ("history", manager.history(ALICE, ALICE_SCOPE, record.id)),
    ]
    for operation, call in calls:
        sink.clear()
        await call
        assert types(sink) == ["memory.read.requested", "memory.read.completed"], operation
        assert {e.operation for e in sink.events} == {operation}

    sink.clear()
    updated = await manager.update(ALICE, ALICE_SCOPE, record.id,
                                   expected_revision=record.revision, content="likes green tea")
    assert types(sink) == ["memory.write.requested", "memory.write.committed"]
    assert sink.events[-1].versions == (2,)

    sink.clear()
    await manager.delete(ALICE, ALICE_SCOPE, record.id, expected_revision=updated.revision)
    assert types(sink) == ["memory.write.requested", "memory.write.committed"]

    for operation, call in [
        ("delete_all", manager.delete_all(ADMIN, ALICE_SCOPE)),
        ("purge_expired", manager.purge_expired(ADMIN, ALICE_SCOPE)),
        ("delete_user", manager.delete_user(ADMIN, "acme", "alice")),
    ]:
        sink.clear()
        await call
        assert types(sink) == ["memory.write.requested", "memory.write.committed"], operation


async def test_invalid_request_is_rejected_before_anything_else(
    manager: GovernedMemoryManager, sink: InMemoryEventSink
) -> None:
    with pytest.raises(MemoryValidationError):
        await manager.add(ALICE, ALICE_SCOPE, "x" * (64 * 1024 + 1))
    with pytest.raises(MemoryValidationError):
        await manager.add(ALICE, ALICE_SCOPE, "x", memory_type="gossip")
    assert types(sink) == ["memory.write.rejected", "memory.write.rejected"]
    assert {e.error_code for e in sink.events} == {"validation"}
    page = await manager.list(ALICE, ALICE_SCOPE)
    assert page.items == ()


async def test_cross_tenant_and_cross_user_access_is_denied_before_the_provider(
    manager: GovernedMemoryManager, sink: InMemoryEventSink
) -> None:
    own = await manager.add(ALICE, ALICE_SCOPE, "mine")
    for scope in (GLOBEX, BOB_SCOPE):
        sink.clear()
        with pytest.raises(MemoryScopeError):
            await manager.add(ALICE, scope, "not mine")
        with pytest.raises(MemoryScopeError):
            await manager.get(ALICE, scope, own.id)
        assert types(sink) == ["memory.write.requested", "memory.write.rejected",
                               "memory.read.requested", "memory.read.rejected"]
        assert all(e.error_code in (None, "scope_denied") for e in sink.events)
        assert sink.events[1].outcome == "deny"
    for scope in (GLOBEX, BOB_SCOPE):
        admin = attrs.evolve(ADMIN, tenant_id=scope.tenant_id)
        assert (await manager.list(admin, scope)).items == ()


class DenyContent:
    name = "deny-marker"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if isinstance(check.request, AddRequest) and "forbidden" in check.request.content:
            return PolicyVerdict.deny("content class not allowed")
        return PolicyVerdict.allow()


class Redact:
    name = "redact"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if isinstance(check.request, AddRequest) and MARKER in check.request.content:
            return PolicyVerdict.transform(
                attrs.evolve(check.request,
                             content=check.request.content.replace(MARKER, "[redacted]")),
                "marker redacted")
        return PolicyVerdict.allow()


class ReviewEverything:
    name = "review"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if isinstance(check.request, AddRequest):
            return PolicyVerdict.review("new sources are reviewed")
        return PolicyVerdict.allow()


def native(clock: ManualClock) -> Any:
    from governed_memory_native import build_native_provider

    return build_native_provider({"backend": "memory"}, clock)


async def test_policy_denial_writes_nothing_and_names_the_decision(clock: ManualClock) -> None:
    sink = InMemoryEventSink()
    async with GovernedMemoryManager(native(clock), clock=clock, sinks=[sink],
                                     policies=[DenyContent()]) as manager:
        with pytest.raises(MemoryPolicyDeniedError) as info:
            await manager.add(ALICE, ALICE_SCOPE, "a forbidden thing")
        assert info.value.decision_id and info.value.policy == "deny-marker"
        rejected = sink.events[-1]
        assert rejected.type == "memory.write.rejected"
        assert rejected.decision_id == info.value.decision_id
        assert rejected.reasons == ("deny-marker: content class not allowed",)
        assert (await manager.list(ALICE, ALICE_SCOPE)).items == ()


async def test_transforms_reach_the_provider(clock: ManualClock) -> None:
    async with GovernedMemoryManager(native(clock), clock=clock,
                                     policies=[Redact()]) as manager:
        record = await manager.add(ALICE, ALICE_SCOPE, f"token {MARKER} here")
        stored = await manager.get(ALICE, ALICE_SCOPE, record.id)
        assert stored.content == "token [redacted] here"


async def test_review_decision_stores_pending_and_hides_it(clock: ManualClock) -> None:
    async with GovernedMemoryManager(native(clock), clock=clock,
                                     policies=[ReviewEverything()]) as manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "from an untrusted tool")
        assert record.status is RecordStatus.PENDING_REVIEW
        with pytest.raises(MemoryNotFoundError):
            await manager.get(ALICE, ALICE_SCOPE, record.id)
        assert (await manager.search(ALICE, ALICE_SCOPE, "untrusted")).hits == ()


async def test_conflict_is_a_rejection(manager: GovernedMemoryManager,
                                       sink: InMemoryEventSink) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "v1")
    await manager.update(ALICE, ALICE_SCOPE, record.id, expected_revision=record.revision,
                         content="v2")
    sink.clear()
    with pytest.raises(MemoryConflictError):
        await manager.update(ALICE, ALICE_SCOPE, record.id, expected_revision=record.revision,
                             content="v3")
    assert types(sink) == ["memory.write.requested", "memory.write.rejected"]
    assert sink.events[-1].error_code == "conflict"
    assert (await manager.get(ALICE, ALICE_SCOPE, record.id)).content == "v2"


class Wrapped:
    """A provider that delegates to the native one but misbehaves on purpose."""

    def __init__(self, inner: Any, **overrides: Any) -> None:
        self._inner = inner
        self.name = "wrapped"
        for key, value in overrides.items():
            setattr(self, key, value)

    def __getattr__(self, item: str) -> Any:
        return getattr(self._inner, item)


async def test_records_of_other_scopes_are_dropped_and_reported(clock: ManualClock) -> None:
    inner = native(clock)
    sink = InMemoryEventSink()
    foreign_holder: dict[str, Any] = {}

    async def leaky_search(request: SearchRequest, ctx: OperationContext) -> SearchResult:
        result: SearchResult = await inner.search(request, ctx)
        foreign = foreign_holder["record"]
        hit = SearchHit(foreign, 99.0, 0, result.hits[0].explanation)
        return SearchResult((hit, *result.hits), result.candidates + 1)

    async def leaky_list(request: ListRequest, ctx: OperationContext) -> Page[Any]:
        page = await inner.list(request, ctx)
        return Page((foreign_holder["record"], *page.items), page.next_cursor)

    async def leaky_get(request: GetRequest, ctx: OperationContext) -> Any:
        return foreign_holder["record"]

    provider = Wrapped(inner, search=leaky_search, list=leaky_list, get=leaky_get)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:  # type: ignore[arg-type]
        own = await manager.add(ALICE, ALICE_SCOPE, "shared word apple")
        foreign_holder["record"] = await manager.add(ADMIN, BOB_SCOPE, "bob's apple")
        # A record whose declared hash matches but whose scope does not is caught too.
        forged = attrs.evolve(foreign_holder["record"], scope_hash=ALICE_SCOPE.scope_hash)
        sink.clear()
        result = await manager.search(ALICE, ALICE_SCOPE, "apple")
        assert [h.record.id for h in result.hits] == [own.id]
        page = await manager.list(ALICE, ALICE_SCOPE)
        assert [r.id for r in page.items] == [own.id]
        with pytest.raises(MemoryNotFoundError):
            await manager.get(ALICE, ALICE_SCOPE, own.id)
        foreign_holder["record"] = forged
        assert [r.id for r in (await manager.list(ALICE, ALICE_SCOPE)).items] == [own.id]
        violations = [e for e in sink.events if e.type == "memory.read.scope_violation"]
        assert len(violations) == 4
        assert all(v.record_ids == (forged.id,) for v in violations)


async def test_provider_crash_is_a_storage_failure_without_details(clock: ManualClock) -> None:
    inner = native(clock)
    sink = InMemoryEventSink()

    async def crash(request: AddRequest, ctx: OperationContext) -> Any:
        raise RuntimeError(f"disk full while writing {request.content}")

    async with GovernedMemoryManager(Wrapped(inner, add=crash), clock=clock,  # type: ignore[arg-type]
                                     sinks=[sink]) as manager:
        with pytest.raises(MemoryStorageError) as info:
            await manager.add(ALICE, ALICE_SCOPE, MARKER)
        assert MARKER not in str(info.value)
        assert types(sink) == ["memory.write.requested", "memory.write.failed"]
        assert sink.events[-1].error_code == "storage"


async def test_provider_timeout_is_unavailable_and_never_retried(clock: ManualClock) -> None:
    inner = native(clock)
    calls = 0

    async def slow(request: AddRequest, ctx: OperationContext) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)

    sink = InMemoryEventSink()
    async with GovernedMemoryManager(Wrapped(inner, add=slow), clock=clock, sinks=[sink],  # type: ignore[arg-type]
                                     timeout_s=0.05) as manager:
        with pytest.raises(MemoryUnavailableError, match="not retried"):
            await manager.add(ALICE, ALICE_SCOPE, "x")
    assert calls == 1
    assert sink.events[-1].type == "memory.write.failed"
    assert sink.events[-1].error_code == "unavailable"


async def test_no_content_query_or_metadata_value_in_events_or_spans(
    manager: GovernedMemoryManager, sink: InMemoryEventSink, spans: InMemorySpanExporter
) -> None:
    meta = {"note": MARKER + "-meta", MARKER + "-key": 1}
    record = await manager.add(ALICE, ALICE_SCOPE, f"content {MARKER}", metadata=meta,
                               key=f"key-{MARKER}")
    await manager.get(ALICE, ALICE_SCOPE, key=f"key-{MARKER}")
    await manager.search(ALICE, ALICE_SCOPE, f"{MARKER} query")
    await manager.list(ALICE, ALICE_SCOPE)
    updated = await manager.update(ALICE, ALICE_SCOPE, record.id, content=f"new {MARKER}",
                                   metadata=meta)
    await manager.history(ALICE, ALICE_SCOPE, record.id)
    with pytest.raises(MemoryConflictError):
        await manager.update(ALICE, ALICE_SCOPE, record.id, expected_revision=record.revision,
                             content=MARKER)
    with pytest.raises(MemoryValidationError):
        await manager.add(ALICE, ALICE_SCOPE, MARKER, importance=7)
    await manager.delete(ALICE, ALICE_SCOPE, record.id, expected_revision=updated.revision)
    trail = "\n".join(e.to_json() for e in sink.events)
    assert len(sink.events) >= 17
    assert MARKER not in trail
    finished = spans.get_finished_spans()
    assert len([s for s in finished if s.name != "governed_memory.policy.decide"]) == 9
    for span in finished:
        blob = json.dumps({k: str(v) for k, v in (span.attributes or {}).items()})
        assert MARKER not in blob and MARKER not in span.name
        assert MARKER not in str(span.status.description)


async def test_spans_follow_the_genai_memory_conventions(
    manager: GovernedMemoryManager, spans: InMemorySpanExporter, sink: InMemoryEventSink
) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "span me")
    await manager.search(ALICE, ALICE_SCOPE, "span")
    with pytest.raises(MemoryScopeError):
        await manager.get(ALICE, GLOBEX, record.id)
    decisions = [s for s in spans.get_finished_spans()
                 if s.name == "governed_memory.policy.decide"]
    add_span, search_span, denied_span = [s for s in spans.get_finished_spans()
                                          if s not in decisions]
    assert len(decisions) == 3
    assert decisions[0].parent is not None
    assert decisions[0].parent.span_id == add_span.context.span_id
    assert decisions[0].attributes["governed_memory.decision.id"] == sink.events[1].decision_id
    assert decisions[2].attributes["governed_memory.policy"] == "scope-authorization"
    assert add_span.name == "create_memory native"
    assert add_span.attributes["gen_ai.operation.name"] == "create_memory"
    assert add_span.attributes["gen_ai.memory.record.id"] == record.id
    assert add_span.attributes["governed_memory.scope.hash"] == ALICE_SCOPE.scope_hash
    assert add_span.attributes["governed_memory.decision.id"] == sink.events[1].decision_id
    assert add_span.attributes["governed_memory.decision.outcome"] == "allow"
    assert search_span.attributes["gen_ai.operation.name"] == "search_memory"
    assert search_span.attributes["gen_ai.memory.record.count"] == 1
    assert denied_span.attributes["governed_memory.error.code"] == "scope_denied"
    assert denied_span.status.status_code.name == "ERROR"
    trace_ids = {e.trace_id for e in sink.events[:2]}
    assert trace_ids == {format(add_span.context.trace_id, "032x")}


async def test_expired_records_are_invisible_through_the_manager(
    manager: GovernedMemoryManager, clock: ManualClock
) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "short lived fact",
                               expires_at=clock.now() + 60)
    assert (await manager.get(ALICE, ALICE_SCOPE, record.id)).id == record.id
    clock.advance(61)
    with pytest.raises(MemoryNotFoundError):
        await manager.get(ALICE, ALICE_SCOPE, record.id)
    assert (await manager.list(ALICE, ALICE_SCOPE)).items == ()
    assert (await manager.search(ALICE, ALICE_SCOPE, "fact")).hits == ()
    page = await manager.purge_expired(ADMIN, ALICE_SCOPE)
    assert page.deleted == 1


async def test_a_principal_that_is_not_a_principal_is_refused(
    manager: GovernedMemoryManager,
) -> None:
    with pytest.raises(MemoryValidationError):
        await manager.add({"principal_id": "me"}, ALICE_SCOPE, "x")  # type: ignore[arg-type]


async def test_a_cancelled_operation_still_closes_its_trail(clock: ManualClock) -> None:
    inner = native(clock)
    started = asyncio.Event()

    async def hang(request: AddRequest, ctx: OperationContext) -> Any:
        started.set()
        await asyncio.sleep(10)

    sink = InMemoryEventSink()
    async with GovernedMemoryManager(Wrapped(inner, add=hang), clock=clock,  # type: ignore[arg-type]
                                     sinks=[sink]) as manager:
        task = asyncio.create_task(manager.add(ALICE, ALICE_SCOPE, "x"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert types(sink) == ["memory.write.requested", "memory.write.failed"]
    assert sink.events[-1].error_code == "cancelled"
    assert sink.events[-1].outcome == "cancelled"


class Redirect:
    """A malicious (or buggy) transform that tries to erase someone else."""

    name = "redirect"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        from governed_memory.requests import DeleteUserRequest

        if isinstance(check.request, DeleteUserRequest):
            return PolicyVerdict.transform(DeleteUserRequest(tenant_id="globex", user_id="bob"),
                                           "redirected")
        return PolicyVerdict.allow()


async def test_a_transform_cannot_redirect_an_erasure(clock: ManualClock) -> None:
    provider = native(clock)
    async with GovernedMemoryManager(provider, clock=clock, policies=[Redirect()]) as manager:
        globex_admin = attrs.evolve(ADMIN, tenant_id="globex")
        bob = Scope("globex", user_id="bob")
        kept = await manager.add(globex_admin, bob, "bob's memory")
        with pytest.raises(MemoryPolicyDeniedError):
            await manager.delete_user(ADMIN, "acme", "alice")
        assert (await manager.get(globex_admin, bob, kept.id)).id == kept.id


class StampTTL:
    """Stamps an expiry from the clock: the transformed request differs on every call."""

    name = "ttl"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if isinstance(check.request, AddRequest):
            return PolicyVerdict.transform(
                attrs.evolve(check.request, expires_at=check.now + 3600), "ttl applied")
        return PolicyVerdict.allow()


async def test_idempotent_retry_matches_across_time_dependent_transforms(
    clock: ManualClock,
) -> None:
    async with GovernedMemoryManager(native(clock), clock=clock,
                                     policies=[StampTTL()]) as manager:
        first = await manager.add(ALICE, ALICE_SCOPE, "once", idempotency_key="k1")
        clock.advance(1)
        again = await manager.add(ALICE, ALICE_SCOPE, "once", idempotency_key="k1")
        assert (again.id, again.version) == (first.id, first.version)
        with pytest.raises(MemoryConflictError):
            await manager.add(ALICE, ALICE_SCOPE, "something else", idempotency_key="k1")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.add(ALICE, {"tenant_id": "acme"}, "x"), "scope"),
        (lambda m: m.search(ALICE, "acme", "x"), "scopes"),
        (lambda m: m.add(ALICE, ALICE_SCOPE, "x", entity_ids="abc"), "entity_ids"),
        (lambda m: m.add(ALICE, ALICE_SCOPE, "x", memory_type="bogus"), "memory_type"),
        (lambda m: m.add(ALICE, ALICE_SCOPE, "x", visibility="public"), "visibility"),
        (lambda m: m.list(ALICE, ALICE_SCOPE, memory_types=["nope"]), "memory_types"),
        (lambda m: m.add(ALICE, ALICE_SCOPE, "x", metadata={"n": 10**5000}), "metadata.n"),
    ],
)
async def test_malformed_arguments_are_validation_errors_naming_the_field(
    manager: GovernedMemoryManager, sink: InMemoryEventSink, call: Any, field: str
) -> None:
    with pytest.raises(MemoryValidationError) as info:
        await call(manager)
    assert info.value.field == field
    assert len(sink.events) == 1 and sink.events[0].type.endswith(".rejected")
    assert sink.events[0].error_code == "validation"
    assert (await manager.list(ADMIN, ALICE_SCOPE)).items == ()


class SlowPolicy:
    """A policy that takes its time (a remote check, a stuck lock)."""

    name = "slow"
    revision = "1"

    def __init__(self, seconds: float, started: asyncio.Event | None = None) -> None:
        self.seconds = seconds
        self.started = started

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if self.started is not None:
            self.started.set()
        await asyncio.sleep(self.seconds)
        return PolicyVerdict.allow()


async def test_the_deadline_covers_policy_evaluation(clock: ManualClock) -> None:
    sink = InMemoryEventSink()
    inner = native(clock)
    async with GovernedMemoryManager(inner, clock=clock, sinks=[sink], timeout_s=0.05,
                                     policies=[SlowPolicy(5)]) as manager:
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(MemoryUnavailableError, match="deadline"):
            await manager.add(ALICE, ALICE_SCOPE, "too slow to decide")
        assert loop.time() - began < 4  # refused at the deadline, not after the policy
        assert types(sink) == ["memory.write.requested", "memory.write.failed"]
        assert sink.events[-1].error_code == "unavailable"
        assert (await inner.list(  # nothing reached storage
            ListRequest(scope=ALICE_SCOPE), OperationContext(operation_id="op_check",
                                                             principal=ALICE,
                                                             now=clock.now()))).items == ()


async def test_a_policy_and_the_provider_share_one_deadline(clock: ManualClock) -> None:
    inner = native(clock)
    calls = 0

    async def slowish(request: AddRequest, ctx: OperationContext) -> Any:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.3)

    async with GovernedMemoryManager(Wrapped(inner, add=slowish), clock=clock,  # type: ignore[arg-type]
                                     timeout_s=0.4, policies=[SlowPolicy(0.2)]) as manager:
        with pytest.raises(MemoryUnavailableError, match="not retried"):
            await manager.add(ALICE, ALICE_SCOPE, "x")  # 0.2 + 0.3 > 0.4
    assert calls == 1


@pytest.mark.parametrize("how", ["cancel", "wait_for"])
async def test_cancelled_during_policy_evaluation_still_closes_its_trail(
        clock: ManualClock, how: str) -> None:
    sink = InMemoryEventSink()
    started = asyncio.Event()
    inner = native(clock)
    async with GovernedMemoryManager(inner, clock=clock, sinks=[sink],
                                     policies=[SlowPolicy(10, started)]) as manager:
        if how == "cancel":
            task = asyncio.create_task(manager.add(ALICE, ALICE_SCOPE, "x"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(manager.add(ALICE, ALICE_SCOPE, "x"), 0.05)
        assert types(sink) == ["memory.write.requested", "memory.write.failed"]
        assert sink.events[-1].outcome == "cancelled"
        assert sink.events[-1].operation_id == sink.events[0].operation_id
        assert (await inner.list(
            ListRequest(scope=ALICE_SCOPE), OperationContext(operation_id="op_check",
                                                             principal=ALICE,
                                                             now=clock.now()))).items == ()


async def test_a_new_record_that_would_already_be_expired_is_refused(
        manager: GovernedMemoryManager, sink: InMemoryEventSink, clock: ManualClock) -> None:
    for when in (clock.now(), clock.now() - 1):
        sink.clear()
        with pytest.raises(MemoryValidationError) as info:
            await manager.add(ALICE, ALICE_SCOPE, "born dead", expires_at=when)
        assert info.value.field == "expires_at"
        assert types(sink) == ["memory.write.rejected"]
        assert sink.events[-1].outcome == "invalid"
    assert (await manager.list(ALICE, ALICE_SCOPE)).items == ()
    record = await manager.add(ALICE, ALICE_SCOPE, "lives a minute", expires_at=clock.now() + 60)
    # an update may still end a record's life now
    await manager.update(ALICE, ALICE_SCOPE, record.id, expires_at=clock.now())
    with pytest.raises(MemoryNotFoundError):
        await manager.get(ALICE, ALICE_SCOPE, record.id)


async def test_provenance_may_be_given_as_a_mapping(manager: GovernedMemoryManager) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "from the web",
                               provenance={"source_type": "web", "source_id": "https://x"})
    assert record.provenance.source_type == "web"
    with pytest.raises(MemoryValidationError) as info:
        await manager.add(ALICE, ALICE_SCOPE, "x", provenance={"source": "web"})  # type: ignore[dict-item]
    assert info.value.field == "provenance"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_an_add_that_erases_an_expired_key_holder_says_so(
        clock: ManualClock, tmp_path: Any, backend: str) -> None:
    from governed_memory_native import build_native_provider

    config = ({"backend": "memory"} if backend == "memory"
              else {"backend": "sqlite", "path": str(tmp_path / "m.db")})
    sink = InMemoryEventSink()
    async with GovernedMemoryManager(build_native_provider(config, clock), clock=clock,
                                     sinks=[sink]) as manager:
        old = await manager.add(ALICE, ALICE_SCOPE, "short-lived", key="k",
                                expires_at=clock.now() + 10)
        clock.advance(11)
        sink.clear()
        new = await manager.add(ALICE, ALICE_SCOPE, "takes the key", key="k")
        committed = sink.events[-1]
        assert committed.type == "memory.write.committed"
        assert f"erased expired key holder {old.id}" in committed.reasons
        assert committed.record_ids == (new.id,)
        sink.clear()
        await manager.add(ALICE, ALICE_SCOPE, "an ordinary add", key="other")
        assert not any("erased" in reason for reason in sink.events[-1].reasons)


async def test_a_search_event_names_its_snapshot(manager: GovernedMemoryManager,
                                                 sink: InMemoryEventSink) -> None:
    await manager.add(ALICE, ALICE_SCOPE, "likes tea")
    sink.clear()
    result = await manager.search(ALICE, ALICE_SCOPE, "tea")
    assert result.snapshot_id is not None
    assert f"snapshot {result.snapshot_id}" in sink.events[-1].reasons
