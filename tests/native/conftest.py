"""Fixtures that run every native provider test against both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import ManualClock
from governed_memory_native import NativeMemoryProvider
from native_support import BACKENDS, build


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
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
