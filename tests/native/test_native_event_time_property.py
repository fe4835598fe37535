"""Property: a search's event window and as-of moment keep exactly the records a plain
model keeps, on every backend, with and without a filter that joins the records row.

Event times, validity intervals, write times and windows come from a small grid, so
boundaries (a window ending exactly at an event, ``as_of`` equal to ``valid_from`` or
``invalid_at``) are the common case rather than the rare one.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from governed_memory import MemoryRecord, MemoryType, Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, SearchRequest
from governed_memory_native import build_native_provider
from hypothesis import given
from hypothesis import strategies as st
from native_support import BACKENDS, config_for

SCOPE = Scope("t1", user_id="u1")
GRID = st.sampled_from((100.0, 200.0, 300.0, 400.0))
MAYBE = st.none() | GRID

records = st.lists(st.fixed_dictionaries({
    "occurred_at": MAYBE, "valid_from": MAYBE, "invalid_at": MAYBE,
    "memory_type": st.sampled_from((MemoryType.FACT, MemoryType.NOTE)),
    "wait": st.sampled_from((0.0, 100.0)),
}), min_size=1, max_size=8)
windows = st.fixed_dictionaries({
    "occurred_since": MAYBE, "occurred_before": MAYBE, "as_of": MAYBE,
    "memory_types": st.sampled_from(((), (MemoryType.FACT,))),
})


def _ctx(clock: ManualClock) -> OperationContext:
    return OperationContext(operation_id="prop", now=clock.now(), principal=Principal(
        principal_id="svc", kind="service", tenant_id="t1", permissions=["memory:admin"]))


def _expected(stored: list[MemoryRecord], window: dict[str, object], now: float) -> set[str]:
    since, before, as_of = (window["occurred_since"], window["occurred_before"],
                            window["as_of"])
    moment = now if as_of is None else as_of
    kept = set()
    for record in stored:
        event = record.created_at if record.occurred_at is None else record.occurred_at
        if ((record.valid_from is None or record.valid_from <= moment)
                and (record.invalid_at is None or moment < record.invalid_at)
                and (since is None or event >= since)
                and (before is None or event < before)
                and (as_of is None or event <= as_of)
                and (not window["memory_types"]
                     or record.memory_type in window["memory_types"])):
            kept.add(record.id)
    return kept


async def _scenario(backend: str, directory: Path, plan: list[dict[str, object]],
                    asked: dict[str, object]) -> None:
    clock = ManualClock(start=150.0)
    provider = build_native_provider(config_for(backend, directory), clock)
    await provider.start()
    try:
        stored: list[MemoryRecord] = []
        for item in plan:
            clock.advance(item["wait"])
            valid_from, invalid_at = item["valid_from"], item["invalid_at"]
            if valid_from is not None and invalid_at is not None and valid_from >= invalid_at:
                invalid_at = None  # an empty interval is refused; keep the record open
            stored.append(await provider.add(AddRequest(
                scope=SCOPE, content="walrus", occurred_at=item["occurred_at"],
                valid_from=valid_from, invalid_at=invalid_at,
                memory_type=item["memory_type"]), _ctx(clock)))
        since, before = asked["occurred_since"], asked["occurred_before"]
        if since is not None and before is not None and since >= before:
            before = None
        window = {**asked, "occurred_before": before}
        result = await provider.search(SearchRequest(
            scopes=(SCOPE,), query="walrus", limit=100, **window), _ctx(clock))
        assert {hit.record.id for hit in result.hits} == _expected(stored, window, clock.now())
    finally:
        await provider.close()


@given(plan=records, asked=windows)
def test_the_event_window_and_as_of_keep_what_the_model_keeps(
        plan: list[dict[str, object]], asked: dict[str, object]) -> None:
    for backend in BACKENDS:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_scenario(backend, Path(directory), plan, asked))
