"""Every integer (and every number that ends up as one) a request carries is bounded by
the library's own validation, naming the field, so no backend ever sees a number it
cannot hold and no check crashes on one it cannot convert.

One test per request type that carries a number: past its bound it is a
``MemoryValidationError`` on the field, at the bound it is accepted. Then the case the
outside trials found, end to end: a 20-digit ``after_seq`` against the real SQLite turn
store was a storage error (SQLite's integers are 64-bit); it is a validation error that
never reaches the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from governed_memory import Permission, Principal, PrincipalKind, Scope
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_INT64, check_int, is_real, shown
from governed_memory.maintenance import (
    OutboxStatusRequest,
    ProcessIndexJobsRequest,
    PurgeSnapshotsRequest,
    ReindexRequest,
)
from governed_memory.ranking_options import RankingOptions
from governed_memory.requests import (
    AddRequest,
    ListPendingRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.tiers import MemoryTiers, TurnDraft
from governed_memory.tiers.requests import (
    ListTurnsRequest,
    RecentTurnsRequest,
    RecordContextRequest,
    UpdateWorkingStateRequest,
)
from governed_memory.tiers.results import InjectedVersion
from governed_memory_native.turns.sqlite import SqliteTurnStore

SCOPE = Scope("acme", user_id="alice", session_id="s1", run_id="r1")
HUGE = 10**400
"""Past what ``float()`` converts: ``math.isfinite`` raised ``OverflowError`` on it."""
ENORMOUS = 10**5000
"""Past Python's 4,300-digit ``str(int)`` limit: an error message quoting it raised."""


def refused(request: Any, field: str) -> MemoryValidationError:
    with pytest.raises(MemoryValidationError) as info:
        request.validate()
    assert info.value.field == field, str(info.value)
    return info.value


def test_the_helpers_never_convert_what_they_cannot() -> None:
    assert is_real(1) and is_real(0.5) and is_real(MAX_INT64)
    assert not any(is_real(v) for v in (True, HUGE, -HUGE, float("nan"), float("inf"), "1"))
    assert check_int(MAX_INT64, "n") == MAX_INT64
    for value in (MAX_INT64 + 1, -1, HUGE, True, 1.0):
        with pytest.raises(MemoryValidationError):
            check_int(value, "n")
    assert shown(42) == "42"
    assert "bit integer" in shown(ENORMOUS)  # never the 5,001 digits


@pytest.mark.parametrize("field", ["valid_from", "invalid_at", "expires_at", "occurred_at"])
@pytest.mark.parametrize("value", [HUGE, -HUGE, ENORMOUS], ids=["huge", "-huge", "enormous"])
def test_add_refuses_a_timestamp_no_float_can_hold(field: str, value: int) -> None:
    refused(AddRequest(scope=SCOPE, content="x", **{field: value}), field)


@pytest.mark.parametrize("value", [HUGE, ENORMOUS], ids=["huge", "enormous"])
def test_add_refuses_importance_and_dedup_threshold_no_float_can_hold(value: int) -> None:
    refused(AddRequest(scope=SCOPE, content="x", importance=value), "importance")
    refused(AddRequest(scope=SCOPE, content="x", dedup_threshold=value), "dedup_threshold")


@pytest.mark.parametrize("field", ["expires_at", "invalid_at", "occurred_at"])
def test_update_refuses_a_timestamp_no_float_can_hold(field: str) -> None:
    refused(UpdateRequest(scope=SCOPE, record_id="r1", **{field: HUGE}), field)
    refused(UpdateRequest(scope=SCOPE, record_id="r1", importance=HUGE), "importance")


@pytest.mark.parametrize("kind", [ListRequest, ListPendingRequest, PurgeExpiredRequest])
@pytest.mark.parametrize("limit", [ENORMOUS, MAX_INT64 + 1, 2**64],
                         ids=["enormous", "int64+1", "2^64"])
def test_page_limits_refuse_any_size_of_integer(kind: Any, limit: int) -> None:
    error = refused(kind(scope=SCOPE, limit=limit), "limit")
    assert len(str(error)) < 200


def test_search_refuses_huge_numbers_by_field() -> None:
    refused(SearchRequest(scopes=(SCOPE,), query="q", limit=ENORMOUS), "limit")
    for field in ("occurred_since", "occurred_before", "as_of"):
        refused(SearchRequest(scopes=(SCOPE,), query="q", **{field: HUGE}), field)
    ranking = RankingOptions(weights={"lexical": HUGE})
    refused(SearchRequest(scopes=(SCOPE,), query="q", ranking=ranking),
            "ranking.weights.lexical")
    refused(SearchRequest(scopes=(SCOPE,), query="q", metadata_filter={"n": 2**63}),
            "metadata_filter.n")


def test_a_turn_sequence_number_is_a_64_bit_integer() -> None:
    ListTurnsRequest(scope=SCOPE, after_seq=MAX_INT64).validate()
    for after in (MAX_INT64 + 1, 10**20 - 1, ENORMOUS, -1, True):
        refused(ListTurnsRequest(scope=SCOPE, after_seq=after), "after_seq")
    refused(ListTurnsRequest(scope=SCOPE, limit=ENORMOUS), "limit")
    refused(RecentTurnsRequest(scope=SCOPE, limit=ENORMOUS), "limit")


def test_working_state_ttl_refuses_an_integer_no_float_can_hold() -> None:
    UpdateWorkingStateRequest(scope=SCOPE, changes={}, ttl_s=60).validate()
    refused(UpdateWorkingStateRequest(scope=SCOPE, changes={}, ttl_s=HUGE), "ttl_seconds")
    refused(UpdateWorkingStateRequest(scope=SCOPE, changes={"n": 2**63}, ttl_s=60),
            "state.n")


def test_an_injected_version_is_a_positive_64_bit_integer() -> None:
    def record(version: int) -> RecordContextRequest:
        return RecordContextRequest(scopes=(SCOPE,), injected=(InjectedVersion(
            "r1", version, "sha256:x", SCOPE.scope_hash),))

    record(1).validate()
    for version in (0, MAX_INT64 + 1, ENORMOUS):
        refused(record(version), "injected[0].version")


def test_store_wide_requests_bound_their_numbers() -> None:
    ProcessIndexJobsRequest(worker_id="w", limit=32, lease_s=60).validate()
    refused(ProcessIndexJobsRequest(worker_id="w", lease_s=HUGE), "lease_s")
    refused(ProcessIndexJobsRequest(worker_id="w", limit=ENORMOUS), "limit")
    refused(ReindexRequest(limit=MAX_INT64 + 1), "limit")
    refused(PurgeSnapshotsRequest(limit=ENORMOUS), "limit")
    refused(OutboxStatusRequest(dead_limit=-1), "dead_limit")


async def test_a_20_digit_after_seq_never_reaches_sqlite(tmp_path: Path) -> None:
    """The trial's request, in process: it was ``MemoryStorageError`` (SQLite
    ``OverflowError``), now the library refuses it by field before the store."""
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                      frozenset({Permission.READ, Permission.WRITE}))
    async with MemoryTiers(turns=SqliteTurnStore(tmp_path / "turns.db")) as tiers:
        await tiers.append(alice, SCOPE, TurnDraft.user("hello"))
        with pytest.raises(MemoryValidationError) as info:
            await tiers.turns_after(alice, SCOPE, 99999999999999999999)
        assert info.value.field == "after_seq"
        # The largest sequence number is a valid question with an empty answer.
        assert await tiers.turns_after(alice, SCOPE, MAX_INT64) == ()
        assert len(await tiers.turns_after(alice, SCOPE, 0)) == 1
