"""Fixtures that run every native provider test against every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from governed_memory.clock import ManualClock
from governed_memory_native import NativeMemoryProvider
from native_support import BACKENDS, SQL_BACKENDS, build
from postgres_support import drop_schemas, drop_stale_schemas


@pytest.fixture(scope="session", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    """The postgres backend's tests each get a private schema; drop them all at the end
    (and, first, those a killed earlier run left behind)."""
    drop_stale_schemas()
    yield
    drop_schemas()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=SQL_BACKENDS)
def sql_backend(request: pytest.FixtureRequest) -> str:
    """A backend held to the memory backend's answers, or sharing a store across
    processes."""
    return str(request.param)


@pytest.fixture
async def provider(backend: str, tmp_path: Path,
                   clock: ManualClock) -> AsyncIterator[NativeMemoryProvider]:
    built = build(backend, tmp_path, clock)
    await built.start()
    try:
        yield built
    finally:
        await built.close()
