"""``[fallback]``: reads go to a replica while the primary is unavailable, marked as
degraded in the trail; writes never go there; every answer is still scope-checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from actors import ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryNotFoundError,
    MemoryUnavailableError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.fallback import FallbackProvider
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.profiles import loads_profile
from governed_memory.records import HitExplanation, SearchHit, SearchResult
from governed_memory.requests import AddRequest, GetRequest, ListRequest
from governed_memory_native import build_native_provider


class Switchable:
    """A provider that can be taken down: every call then fails as unavailable."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = "primary"
        self.down = False

    def capabilities(self) -> Any:
        return self._inner.capabilities()

    # Every optional feature is this object's own (its attributes fall through to the
    # wrapped provider, through the switch above).
    @property
    def review(self) -> Any:
        return self

    @property
    def indexing(self) -> Any:
        return self

    @property
    def outbox(self) -> Any:
        return self

    @property
    def replay(self) -> Any:
        return self

    async def start(self) -> None:
        await self._inner.start()

    async def close(self) -> None:
        await self._inner.close()

    async def health(self) -> Any:
        return await self._inner.health()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise MemoryUnavailableError("primary is down")
            return await target(*args, **kwargs)

        return call


async def _seed(provider: Any, clock: ManualClock, *contents: str,
                scope: Any = ALICE_SCOPE) -> list[Any]:
    ctx = OperationContext(operation_id="op_seed", principal=ALICE, now=clock.now())
    return [await provider.add(AddRequest(scope=scope, content=content),
                               ctx) for content in contents]


@pytest.fixture
async def setup(tmp_path: Path) -> Any:
    clock = ManualClock()
    primary = Switchable(build_native_provider({"backend": "memory"}, clock))
    replica = build_native_provider({"backend": "sqlite", "path": str(tmp_path / "r.db")},
                                    clock)
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager(FallbackProvider(primary, replica),  # type: ignore[arg-type]
                                    clock=clock, sinks=[sink])
    async with manager:
        yield manager, primary, replica, sink, clock


async def test_reads_fall_back_and_say_so(setup: Any) -> None:
    manager, primary, replica, sink, clock = setup
    [copy] = await _seed(replica, clock, "likes green tea")
    record = await manager.add(ALICE, ALICE_SCOPE, "likes black coffee")
    assert (await manager.get(ALICE, ALICE_SCOPE, record.id)).content == "likes black coffee"
    assert not any("degraded" in r for e in sink.events for r in e.reasons)
    primary.down = True
    for call in (manager.get(ALICE, ALICE_SCOPE, copy.id), manager.list(ALICE, ALICE_SCOPE),
                 manager.search(ALICE, ALICE_SCOPE, "tea"),
                 manager.history(ALICE, ALICE_SCOPE, copy.id)):
        sink.clear()
        await call
        outcome = sink.events[-1]
        assert outcome.type == "memory.read.completed"
        assert "degraded: read from fallback native" in outcome.reasons
    found = await manager.search(ALICE, ALICE_SCOPE, "tea")
    assert [hit.record.id for hit in found.hits] == [copy.id]
    with pytest.raises(MemoryNotFoundError):  # the replica's answer, not a retry
        await manager.get(ALICE, ALICE_SCOPE, record.id)


async def test_writes_never_go_to_the_fallback(setup: Any) -> None:
    manager, primary, replica, sink, clock = setup
    primary.down = True
    with pytest.raises(MemoryUnavailableError):
        await manager.add(ALICE, ALICE_SCOPE, "lost if it went to a replica")
    assert sink.events[-1].type == "memory.write.failed"
    listed = await replica.list(
        ListRequest(scope=ALICE_SCOPE),
        OperationContext(operation_id="op_check", principal=ALICE, now=clock.now()))
    assert listed.items == ()


async def test_the_fallback_is_scope_checked_like_the_primary(setup: Any) -> None:
    manager, primary, replica, sink, clock = setup
    [bobs] = await _seed(replica, clock, "bob's secret tea", scope=BOB_SCOPE)
    primary.down = True

    async def leaky_search(request: Any, ctx: Any) -> Any:  # a replica gone wrong
        result = await type(replica).search(replica, request, ctx)
        stray = await replica.get(
            GetRequest(scope=BOB_SCOPE, record_id=bobs.id),
            ctx)
        return SearchResult(hits=(*result.hits, SearchHit(stray, 1.0, 1, HitExplanation(()))))

    replica.search = leaky_search  # type: ignore[method-assign]
    found = await manager.search(ALICE, ALICE_SCOPE, "tea")
    assert bobs.id not in [hit.record.id for hit in found.hits]
    assert "memory.read.scope_violation" in sink.types()


async def test_health_says_whether_reads_can_be_served(setup: Any) -> None:
    manager, primary, *_ = setup
    await primary._inner.close()
    status = await manager.health()
    assert not status.ok and "reads fall back to native (ok)" in status.detail
    await primary._inner.start()


PROFILE = """
spec_version = 1
id = "with-fallback"
version = "1.0.0"

[provider]
name = "native"
config = {{ backend = "memory" }}

[fallback]
provider = "{fallback}"
[fallback.config]
backend = "sqlite"
path = "{path}"
"""


def test_a_profile_builds_its_fallback_outside_the_cache(tmp_path: Path) -> None:
    spec = loads_profile(PROFILE.format(fallback="native", path=tmp_path / "r.db"))
    manager = GovernedMemoryManager.from_profile(spec)
    assert isinstance(manager._provider, FallbackProvider)
    assert manager._provider.fallback_name == "native"
    with pytest.raises(MemoryConfigurationError, match="fallback"):
        GovernedMemoryManager.from_profile(
            loads_profile(PROFILE.format(fallback="nowhere", path=tmp_path / "r.db")))
