"""Configuration, registration and the less travelled paths of the Mem0 provider."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from actors import ADMIN, ALICE_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryNotFoundError,
    MemoryUnavailableError,
)
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.usage import UsageMeter
from governed_memory_mem0 import build_mem0_provider
from governed_memory_mem0.config import parse_config
from mem0_support import API_KEY_ENV, local_config, platform_config, wire_server


@pytest.mark.parametrize(("config", "named"), [
    ({"client": "local", "vector_stor": {}}, "vector_stor"),
    ({"client": "platform", "vector_store": {}}, "vector_store"),
    ({"client": "remote"}, "client"),
    ({"infer": True}, "infer"),
    ({"vector_store": {"provider": "faiss", "path": ":memory:"}}, "vector_store.path"),
    ({"vector_store": {"provider": "chroma"}}, "vector_store.provider"),
    ({"embedder": {"dimension": 3}}, "embedder.dimension"),
    ({"namespace_prefix": "a*b"}, "namespace_prefix"),
    ({"client": "platform", "host": "api.mem0.ai"}, "host"),
    ({"timeout_seconds": 0}, "timeout_seconds"),
])
def test_bad_config_is_refused_with_the_key_named(config: dict[str, object], named: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=named.split(".")[0]):
        parse_config(config, environ={})


def test_defaults_live_under_governed_memory_home() -> None:
    settings = parse_config({}, environ={"GOVERNED_MEMORY_HOME": "/data/gm"})
    assert settings.ledger_path == "/data/gm/mem0/ledger.db"
    assert settings.local is not None and settings.local.vector_path == "/data/gm/mem0/faiss"
    assert settings.durable


def test_capabilities_are_declared_honestly(tmp_path: Path) -> None:
    provider = build_mem0_provider(local_config(tmp_path), ManualClock())
    declared = provider.capabilities()
    assert declared.durable and not declared.transactional and not declared.multi_process
    assert declared.vector_search and not declared.lexical_search
    assert not declared.review and not declared.dedup
    meter = provider.usage_meter  # counted in the ledger, by its own object
    assert declared.usage and isinstance(meter, UsageMeter) and meter is not provider
    volatile = build_mem0_provider(local_config(
        tmp_path, ledger_path=":memory:",
        vector_store={"provider": "qdrant", "path": ":memory:"}), ManualClock())
    assert not volatile.capabilities().durable


def test_the_plugin_registers_mem0() -> None:
    registration = PluginManager.load().providers.get("mem0")
    assert registration.factory is build_mem0_provider


async def test_the_manager_builds_it_from_plugins(tmp_path: Path) -> None:
    async with GovernedMemoryManager.from_plugins("mem0", local_config(tmp_path)) as manager:
        record = await manager.add(ADMIN, ALICE_SCOPE, "built by name")
        assert (await manager.get(ADMIN, ALICE_SCOPE, record.id)).content == "built by name"
        assert (await manager.health()).ok


async def test_qdrant_in_memory_store_works_too(tmp_path: Path) -> None:
    config = local_config(tmp_path, ledger_path=":memory:",
                          vector_store={"provider": "qdrant", "path": ":memory:"})
    async with GovernedMemoryManager(build_mem0_provider(config, ManualClock()),
                                     clock=ManualClock()) as manager:
        tea = await manager.add(ADMIN, ALICE_SCOPE, "green tea in the morning")
        await manager.add(ADMIN, ALICE_SCOPE, "a bicycle with red wheels")
        found = await manager.search(ADMIN, ALICE_SCOPE, "green tea", limit=1)
        assert [hit.record.id for hit in found.hits] == [tea.id]
        await manager.delete(ADMIN, ALICE_SCOPE, tea.id, hard=True)
        with pytest.raises(MemoryNotFoundError):
            await manager.get(ADMIN, ALICE_SCOPE, tea.id)


async def test_a_missing_or_refused_platform_key_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = wire_server()
    missing = build_mem0_provider(
        platform_config(server, tmp_path, api_key_env="GM_NO_SUCH_KEY"), ManualClock())
    with pytest.raises(MemoryConfigurationError, match="GM_NO_SUCH_KEY"):
        await missing.start()
    monkeypatch.setenv("GM_WRONG_KEY", "not-the-key")
    wrong = build_mem0_provider(
        platform_config(server, tmp_path / "w", api_key_env="GM_WRONG_KEY"), ManualClock())
    with pytest.raises(MemoryConfigurationError) as caught:
        await wrong.start()
    assert "not-the-key" not in str(caught.value) and server.url not in str(caught.value)
    assert os.environ[API_KEY_ENV]  # the shared key is untouched


async def test_an_unreachable_platform_is_unavailable(tmp_path: Path) -> None:
    wire_server()  # sets the key variable
    provider = build_mem0_provider(
        platform_config(wire_server(), tmp_path, host="http://127.0.0.1:9",
                        timeout_seconds=1.0), ManualClock())
    with pytest.raises(MemoryUnavailableError):
        await provider.start()


async def test_the_platform_requests_carry_the_documented_headers(tmp_path: Path) -> None:
    import hashlib

    from mem0_support import API_KEY

    server = wire_server()
    provider = build_mem0_provider(platform_config(server, tmp_path), ManualClock())
    async with GovernedMemoryManager(provider, clock=ManualClock()) as manager:
        await manager.add(ADMIN, ALICE_SCOPE, "headers")
    method, path, headers = server.state.requests[-1]
    assert (method, path) == ("POST", "/v3/memories/add/")
    assert headers["Authorization"] == f"Token {API_KEY}"
    assert headers["Mem0-User-ID"] == hashlib.md5(API_KEY.encode()).hexdigest()
    assert headers["X-Mem0-Client"].startswith("mem0-python/")


async def test_a_registered_embedder_plugin_feeds_mem0(tmp_path: Path) -> None:
    """The project's own ``hashing`` embedder plugin, picked by name, embeds for Mem0."""
    config = local_config(tmp_path, embedder={"name": "hashing", "options": {"dimension": 96}})
    provider = build_mem0_provider(config, ManualClock())
    async with GovernedMemoryManager(provider, clock=ManualClock()) as manager:
        tea = await manager.add(ADMIN, ALICE_SCOPE, "green tea in the morning")
        await manager.add(ADMIN, ALICE_SCOPE, "a bicycle with red wheels")
        found = await manager.search(ADMIN, ALICE_SCOPE, "green tea", limit=1)
        assert [hit.record.id for hit in found.hits] == [tea.id]
        assert provider.client.memory.vector_store.index.d == 96  # type: ignore[attr-defined]
    mismatch = local_config(tmp_path / "m", embedder={
        "name": "hashing", "dimension": 64, "options": {"dimension": 96}})
    with pytest.raises(MemoryConfigurationError, match="dimension"):
        build_mem0_provider(mismatch, ManualClock())
    with pytest.raises(MemoryConfigurationError, match="no-such-model"):
        build_mem0_provider(local_config(tmp_path / "x", embedder={"name": "no-such-model"}),
                            ManualClock())


@pytest.mark.parametrize("kind", ["local", "platform"])
async def test_everything_survives_a_restart(kind: str, tmp_path: Path) -> None:
    """``durable`` is declared: records, revisions, history and idempotency outlive the
    process's provider (Mem0's files or the Platform, and the ledger on disk)."""
    config = (local_config(tmp_path) if kind == "local"
              else platform_config(wire_server(), tmp_path))
    clock = ManualClock()
    async with GovernedMemoryManager(build_mem0_provider(config, clock),
                                     clock=clock) as manager:
        first = await manager.add(ADMIN, ALICE_SCOPE, "kept across restarts",
                                  idempotency_key="durable-1", key="pref")
        updated = await manager.update(ADMIN, ALICE_SCOPE, first.id, content="kept, edited")
    async with GovernedMemoryManager(build_mem0_provider(config, clock),
                                     clock=clock) as manager:
        again = await manager.get(ADMIN, ALICE_SCOPE, key="pref")
        assert (again.id, again.content, again.revision) == (
            first.id, "kept, edited", updated.revision)
        assert [v.record.version for v in await manager.history(ADMIN, ALICE_SCOPE, first.id)
                ] == [1, 2]
        replay = await manager.add(ADMIN, ALICE_SCOPE, "kept across restarts",
                                   idempotency_key="durable-1", key="pref")
        assert (replay.id, replay.revision) == (first.id, first.revision)
        found = await manager.search(ADMIN, ALICE_SCOPE, "edited")
        assert [hit.record.id for hit in found.hits] == [first.id]
