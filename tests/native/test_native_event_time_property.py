"""Property: a search's event window and as-of moment keep exactly the records a plain
model keeps, on every backend, with and without a filter that joins the records row.

Event times, validity intervals, write times and windows come from a small grid, so
boundaries (a window ending exactly at an event, ``as_of`` equal to ``valid_from`` or
``invalid_at``) are the common case rather than the rare one.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from governed_memory import MemoryRecord, MemoryType, Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from hypothesis import given
from hypothesis import strategies as st
from native_support import BACKENDS, config_for

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


class _Stores:
    """One started provider per backend for the whole module, on one event loop: an
    example starts no provider (a PostgreSQL start migrates a schema), so the thorough
    profile's 10,000 examples finish. Examples never meet: each writes to a scope of
    its own, and the shared clock is set back to the grid's start before each."""

    def __init__(self, directory: Path) -> None:
        self.runner = asyncio.Runner()
        self.clock = ManualClock(start=150.0)
        self.providers: dict[str, NativeMemoryProvider] = {}
        self.examples = itertools.count()
        for backend in BACKENDS:
            provider = build_native_provider(
                config_for(backend, directory / backend), self.clock)
            self.runner.run(provider.start())
            self.providers[backend] = provider

    def close(self) -> None:
        try:
            for provider in self.providers.values():
                self.runner.run(provider.close())
        finally:
            self.runner.close()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Stores]:
    built = _Stores(tmp_path_factory.mktemp("event-time"))
    try:
        yield built
    finally:
        built.close()


async def _scenario(provider: NativeMemoryProvider, clock: ManualClock, scope: Scope,
                    plan: list[dict[str, object]], asked: dict[str, object]) -> None:
    clock.set(150.0)
    stored: list[MemoryRecord] = []
    for item in plan:
        clock.advance(item["wait"])
        valid_from, invalid_at = item["valid_from"], item["invalid_at"]
        if valid_from is not None and invalid_at is not None and valid_from >= invalid_at:
            invalid_at = None  # an empty interval is refused; keep the record open
        stored.append(await provider.add(AddRequest(
            scope=scope, content="walrus", occurred_at=item["occurred_at"],
            valid_from=valid_from, invalid_at=invalid_at,
            memory_type=item["memory_type"]), _ctx(clock)))
    since, before = asked["occurred_since"], asked["occurred_before"]
    if since is not None and before is not None and since >= before:
        before = None
    window = {**asked, "occurred_before": before}
    result = await provider.search(SearchRequest(
        scopes=(scope,), query="walrus", limit=100, **window), _ctx(clock))
    assert {hit.record.id for hit in result.hits} == _expected(stored, window, clock.now())


@given(plan=records, asked=windows)
def test_the_event_window_and_as_of_keep_what_the_model_keeps(
        stores: _Stores, plan: list[dict[str, object]], asked: dict[str, object]) -> None:
    scope = Scope("t1", user_id=f"u{next(stores.examples)}")
    for provider in stores.providers.values():
        stores.runner.run(_scenario(provider, stores.clock, scope, plan, asked))
