"""start, close, health, capabilities, the factory's config checks and the plugin hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryUnavailableError
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
from governed_memory.provider import MemoryProvider
from governed_memory.requests import GetRequest
from governed_memory_native import NativeMemoryProvider, SqliteBackend, build_native_provider
from governed_memory_native import plugin as native_plugin
from governed_memory_native.config import HOME_ENV
from governed_memory_native.sqlite.schema import LATEST_VERSION
from native_support import USER_SCOPE, build, config_for, make_ctx, note


async def test_provider_satisfies_the_protocol(provider: NativeMemoryProvider) -> None:
    assert isinstance(provider, MemoryProvider)
    assert provider.name == "native"


async def test_capabilities_are_honest(provider: NativeMemoryProvider, backend: str) -> None:
    caps = provider.capabilities()
    assert caps.transactional and caps.compare_and_set and caps.idempotency
    assert caps.lexical_search and not caps.vector_search and caps.max_page_size == 100
    assert caps.durable is (backend != "memory")
    assert caps.multi_process is (backend != "memory")


async def test_health_is_a_real_check(provider: NativeMemoryProvider, backend: str) -> None:
    status = await provider.health()
    assert status.ok and status.provider == "native" and status.latency_ms >= 0
    if backend == "sqlite":
        assert f"schema v{LATEST_VERSION}," in status.detail


async def test_operations_need_start_and_stop_after_close(backend: str, tmp_path: Path,
                                                          clock: ManualClock) -> None:
    provider = build(backend, tmp_path, clock)
    with pytest.raises(MemoryUnavailableError):
        await provider.add(note(), make_ctx(clock))
    assert not (await provider.health()).ok
    await provider.start()
    await provider.start()  # idempotent
    record = await provider.add(note(), make_ctx(clock))
    await provider.close()
    with pytest.raises(MemoryUnavailableError):
        await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))
    assert not (await provider.health()).ok
    await provider.close()  # closing twice is harmless


def test_factory_does_no_io(tmp_path: Path, clock: ManualClock) -> None:
    target = tmp_path / "deep" / "dir" / "memory.db"
    provider = build_native_provider({"path": str(target)}, clock)
    assert isinstance(provider.backend, SqliteBackend)
    assert not target.parent.exists()


async def test_start_creates_the_parent_directory(tmp_path: Path, clock: ManualClock) -> None:
    target = tmp_path / "deep" / "dir" / "memory.db"
    provider = build_native_provider({"path": str(target)}, clock)
    await provider.start()
    try:
        assert target.exists()
    finally:
        await provider.close()


def test_default_path_uses_governed_memory_home(tmp_path: Path, clock: ManualClock,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    provider = build_native_provider({}, clock)
    assert isinstance(provider.backend, SqliteBackend)
    assert provider.backend.path == tmp_path / "home" / "memory.db"
    monkeypatch.delenv(HOME_ENV)
    fallback = build_native_provider({}, clock).backend
    assert isinstance(fallback, SqliteBackend)
    assert fallback.path == Path(".governed-memory") / "memory.db"


@pytest.mark.parametrize(("config", "key"), [
    ({"backend": "postgres"}, "backend"),
    ({"backend": 1}, "backend"),
    ({"busy_timeout_ms": "5"}, "busy_timeout_ms"),
    ({"busy_timeout_ms": True}, "busy_timeout_ms"),
    ({"busy_timeout_ms": -1}, "busy_timeout_ms"),
    ({"path": ""}, "path"),
    ({"path": 3}, "path"),
    ({"path": ":memory:"}, "path"),
    ({"backend": "memory", "path": "x.db"}, "path"),
    ({"busy_timeout": 10}, "busy_timeout"),
])
def test_bad_config_names_the_key(config: dict[str, Any], key: str, clock: ManualClock) -> None:
    with pytest.raises(MemoryConfigurationError, match=key):
        build_native_provider(config, clock)


def test_plugin_registers_the_native_factory(tmp_path: Path, clock: ManualClock) -> None:
    manager = PluginManager.load([native_plugin], entry_points=False)
    registration = manager.providers.get("native")
    # build_native_provider behind a factory that also declares each backend for
    # `providers list` (tests/cli/test_providers_list_backends.py holds it to that).
    assert [v["name"] for v in registration.factory.variants()] == ["sqlite", "memory",
                                                                    "postgres"]
    assert registration.description
    provider = registration.factory(config_for("memory", tmp_path), clock)
    assert isinstance(provider, NativeMemoryProvider)
