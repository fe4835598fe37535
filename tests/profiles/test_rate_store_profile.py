"""``[quotas] rate_store``: where a profile's writes-per-minute windows are counted, checked
when the profile loads (errors name the TOML path), built with the manager, and shared
by every manager that uses the same store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from actors import ADMIN, ALICE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
from governed_memory.profiles import ProfileLoadError, check_against_plugins, parse_profile
from governed_memory.profiles.build import build_rate_windows
from governed_memory.rates import ProcessRateWindows, RateLimit
from profile_support import BUILTIN, installed
from redis_server import delete_prefix, require_redis, unique_prefix

BASE: dict[str, Any] = {"spec_version": 1, "id": "x", "version": "1.0.0"}
MEMORY = {"name": "native", "config": {"backend": "memory"}}
SCOPE = Scope("acme", user_id="alice")
NOW = 1_800_000_000.0


def profile(quotas: dict[str, Any] | None = None, **sections: Any) -> Any:
    return parse_profile({**BASE, "provider": MEMORY, "policies": {"enabled": ["quotas"]},
                          "quotas": {"writes_per_minute_per_scope": 3, **(quotas or {})},
                          **sections})


# -- load-time checks ----------------------------------------------------------------------


@pytest.mark.parametrize(("data", "message"), [
    ({"quotas": {"rate_store": ""}}, r"quotas\.rate_store: must name where write rates"),
    ({"quotas": {"rate_store": 7}}, r"quotas\.rate_store"),
    ({"quotas": {"rate_store": "redis", "writes_per_minute_per_scope": None}},
     r"quotas\.rate_store: is 'redis', but no writes_per_minute_per_tenant or "
     r"writes_per_minute_per_scope limit counts there"),
    ({"stores": {"rates": {"kind": "redis"}}},
     r"stores\.rates: configures a rate store, but \[quotas\] rate_store is 'provider'"),
    ({"quotas": {"rate_store": "process"}, "stores": {"rates": {"kind": "redis"}}},
     r"stores\.rates: configures a rate store, but \[quotas\] rate_store is 'process'"),
    ({"quotas": {"rate_store": "redis"}, "stores": {"rates": {"kind": "memcached"}}},
     r"stores\.rates\.kind: is 'memcached', but \[quotas\] rate_store is 'redis'"),
])
def test_a_rate_store_that_cannot_work_is_refused_at_load(data: dict[str, Any],
                                                         message: str) -> None:
    quotas = {"writes_per_minute_per_scope": 3, **data.pop("quotas", {})}
    quotas = {k: v for k, v in quotas.items() if v is not None}
    with pytest.raises(ProfileLoadError, match=message):
        parse_profile({**BASE, "provider": MEMORY, "policies": {"enabled": ["quotas"]},
                       "quotas": quotas, **data})


def test_an_unregistered_rate_store_is_refused_against_the_plugins() -> None:
    spec = profile({"rate_store": "nowhere"})
    with pytest.raises(ProfileLoadError,
                       match=r"quotas\.rate_store: unknown rate store 'nowhere'; "
                             r"registered: redis"):
        check_against_plugins(spec, installed())
    with pytest.raises(ProfileLoadError, match=r"quotas\.rate_store: unknown rate store"):
        GovernedMemoryManager.from_profile(spec, plugins=installed(), sinks=())
    bare = PluginManager.load(entry_points=False)
    with pytest.raises(MemoryConfigurationError, match=r"registered: none"):
        build_rate_windows(object(), profile({"rate_store": "redis"}), bare)  # type: ignore[arg-type]


@pytest.mark.parametrize(("config", "message"), [
    ({"timeout": 1}, r"stores\.rates\.config: unknown redis rate store config key\(s\): "
                     r"timeout; known: connect_timeout_s, key_prefix"),
    ({"url": ""}, r"stores\.rates\.config: url: must be a non-empty string"),
    ({"key_prefix": "a{b}"}, r"stores\.rates\.config: key_prefix: braces are reserved"),
    ({"socket_timeout_s": 0}, r"stores\.rates\.config: socket_timeout_s: must be a number"),
    ({"retries": 9}, r"stores\.rates\.config: retries: must be an integer from 0 to 5"),
])
def test_the_redis_rate_store_config_is_strict(config: dict[str, Any], message: str) -> None:
    spec = profile({"rate_store": "redis"}, stores={"rates": {"kind": "redis", "config": config}})
    with pytest.raises(ProfileLoadError, match=message):
        check_against_plugins(spec, installed())


def test_the_revision_covers_the_rate_store_only_when_it_is_not_the_default() -> None:
    plain = parse_profile(BASE)
    assert plain.revision == ("sha256:0d316c2a03c99c5c026ba57876dd73e55e85be9f22fdb218f7"
                              "a8d6d85ad38126")
    assert profile().revision == profile({"rate_store": "provider"}).revision
    assert profile().revision != profile({"rate_store": "process"}).revision


PUBLISHED = {
    "local@1.0.0": "sha256:6e7f43f355ca22b32a9a99e71882585be05d129c06b4a6969fc36e6e4e5122bc",
    "chat-assistant@1.0.0":
        "sha256:ccbc2bbabf78d13f5bd60be96e999ff6d81cd69bd9cebcec2a43af80660564f4",
    "agent-run@1.0.0": "sha256:494865fa6bca02fb05c8f8656ed0093f10d154dfd4e10168ed59152e4a95e288",
    "compliance-strict@1.0.0":
        "sha256:77230f55164f7f478d9c26d12d06a59b9884e9cc03f423bfbbf64394bfe0f13d",
}
"""The built-in profiles' revisions as published before ``rate_store`` existed."""


def test_the_built_in_profiles_keep_their_revisions() -> None:
    from governed_memory.profiles.registry import ProfileRegistry

    profiles = ProfileRegistry.from_plugins(installed())
    assert set(PUBLISHED) == set(BUILTIN)
    for reference, revision in PUBLISHED.items():
        spec = profiles.get(reference)
        assert spec.quotas.rate_store == "provider", reference
        assert spec.revision == revision, reference


# -- what the manager counts in ------------------------------------------------------------


async def test_by_default_the_manager_counts_in_the_providers_windows(tmp_path: Path) -> None:
    config = {"backend": "sqlite", "path": str(tmp_path / "m.db")}
    spec = profile(provider={"name": "native", "config": config})
    async with GovernedMemoryManager.from_profile(spec, sinks=()) as manager:
        from governed_memory_native.sqlite.rates import SqliteRateWindows

        windows = manager.activity.rate_windows
        assert isinstance(windows, SqliteRateWindows) and windows.shared
        assert windows.path == tmp_path / "m.db-rates"


async def test_process_windows_when_the_profile_says_so() -> None:
    async with GovernedMemoryManager.from_profile(profile({"rate_store": "process"}),
                                                  sinks=()) as manager:
        windows = manager.activity.rate_windows
        assert isinstance(windows, ProcessRateWindows) and windows.reason is None


class Bare:
    """A provider that keeps no rate windows (only what ``build_rate_windows`` reads)."""

    name = "bare"
    rate_windows = None


async def test_without_provider_windows_process_windows_warn_once(
        caplog: pytest.LogCaptureFixture) -> None:
    windows = build_rate_windows(Bare(), profile(), installed())  # type: ignore[arg-type]
    assert isinstance(windows, ProcessRateWindows) and not windows.shared
    assert windows.reason is not None and "provider bare keeps no rate windows" in windows.reason
    limit = RateLimit("scope:warned", 5, 60.0, "scope")
    with caplog.at_level(logging.WARNING, logger="governed_memory.rates"):
        await windows.admit((limit,), NOW)
        await windows.admit((limit,), NOW)
        again = build_rate_windows(Bare(), profile(), installed())  # type: ignore[arg-type]
        await again.admit((limit,), NOW)
    warnings = [r.getMessage() for r in caplog.records if r.name == "governed_memory.rates"]
    assert len(warnings) == 1
    assert "counted in this process only" in warnings[0] and "rate_store" in warnings[0]


async def test_one_limit_across_two_nodes_through_redis() -> None:
    """Two managers, each over a memory store of its own (two nodes), one Redis window;
    with process windows each would admit the whole limit."""
    url = require_redis()
    prefix = unique_prefix()
    spec = profile({"rate_store": "redis"},
                   stores={"rates": {"kind": "redis",
                                     "config": {"url": url, "key_prefix": prefix}}})
    nodes = [GovernedMemoryManager.from_profile(spec, clock=ManualClock(NOW), sinks=())
             for _ in range(2)]
    admitted = 0
    try:
        from governed_memory_redis.rates import RedisRateWindows

        assert all(isinstance(m.activity.rate_windows, RedisRateWindows) for m in nodes)
        for n in range(8):
            try:
                await nodes[n % 2].add(ALICE, SCOPE, f"note {n}")
                admitted += 1
            except MemoryPolicyDeniedError as exc:
                assert "scope write rate above 3 per minute" in str(exc)
    finally:
        for manager in nodes:
            await manager.close()
        delete_prefix(prefix)
    assert admitted == 3
    # The manager built these windows from the profile, so it closed them.
    assert all(m.activity.rate_windows._client is None for m in nodes)  # type: ignore[attr-defined]


async def test_tier_writes_count_in_the_managers_windows() -> None:
    from governed_memory.tiers import InMemoryTurnStore, MemoryTiers
    from governed_memory.tiers.turns import TurnDraft

    spec = profile({"writes_per_minute_per_tenant": 3, "writes_per_minute_per_scope": 100})
    session = Scope("acme", user_id="alice", session_id="s1")
    async with GovernedMemoryManager.from_profile(spec, clock=ManualClock(NOW),
                                                  sinks=()) as manager:
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
        assert tiers.governance.rate_windows is manager.activity.rate_windows
        await manager.add(ALICE, SCOPE, "a memory")
        await tiers.append(ALICE, session, TurnDraft.user("a turn"))
        await tiers.append(ALICE, session, TurnDraft.user("another"))
        with pytest.raises(MemoryPolicyDeniedError, match="tenant write rate above 3"):
            await manager.add(ALICE, SCOPE, "one too many")


async def test_a_rate_store_that_is_down_denies_the_write_and_stores_nothing() -> None:
    spec = profile({"rate_store": "redis"},
                   stores={"rates": {"kind": "redis", "config": {
                       "url": "redis://127.0.0.1:1/0", "connect_timeout_s": 0.2,
                       "retries": 0}}})
    async with GovernedMemoryManager.from_profile(spec, clock=ManualClock(NOW),
                                                  sinks=()) as manager:
        with pytest.raises(MemoryPolicyDeniedError,
                           match="quotas: write rate could not be checked; quota enforced"):
            await manager.add(ALICE, SCOPE, "not without a rate check")
        assert (await manager.list(ALICE, SCOPE)).items == ()
        await manager.delete_user(ADMIN, "acme", "alice")  # forgetting is never limited
