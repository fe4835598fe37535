"""The write-rate windows contract (``governed_memory.rates.RateWindows``), held by every
built-in store: process memory, the native provider's SQLite sidecar and PostgreSQL
tables, and Redis (real servers).

Each shared store is used through two clients of its own (two connections, pools or
threads), as two worker processes would: what one counts, the other sees. The property
test fires concurrent admits from both clients at one instant and checks the result is
one a serial run could give: no window above its limit, no event counted in one window
and not the other, and no refusal while every window it names still had room.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from governed_memory.errors import MemoryUnavailableError
from governed_memory.rates import ProcessRateWindows, RateLimit, RateWindows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from postgres_support import POSTGRES_DSN, drop_schemas, require_postgres, schema_for
from redis_server import delete_prefix, require_redis, unique_prefix

NOW = 1_000_000.0
STORES = ("process", "sqlite", "postgres", "redis")

Clients = tuple[RateWindows, RateWindows]


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Any:
    yield
    drop_schemas()


def open_clients(store: str, directory: Path) -> tuple[Clients, Callable[[], None]]:
    """Two clients of one store (the same object for process windows), and what removes
    the store's data afterwards."""
    if store == "process":
        windows = ProcessRateWindows()
        return (windows, windows), lambda: None
    if store == "sqlite":
        from governed_memory_native.sqlite.rates import SqliteRateWindows

        path = directory / "memory.db-rates"
        return (SqliteRateWindows(path, busy_timeout_ms=5_000),
                SqliteRateWindows(path, busy_timeout_ms=5_000)), lambda: None
    if store == "postgres":
        require_postgres()
        from governed_memory_native.postgres.rates import PostgresRateWindows

        schema = schema_for(directory)
        return (PostgresRateWindows(POSTGRES_DSN, schema=schema, busy_timeout_ms=5_000),
                PostgresRateWindows(POSTGRES_DSN, schema=schema, busy_timeout_ms=5_000)), \
            lambda: None
    from governed_memory_redis.rates import RedisRatesConfig, RedisRateWindows

    url = require_redis()
    prefix = unique_prefix("rates")
    config = RedisRatesConfig(url=url, key_prefix=prefix)
    return (RedisRateWindows(config), RedisRateWindows(config)), lambda: delete_prefix(prefix)


@pytest.fixture(params=STORES)
async def clients(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Clients]:
    pair, clean = open_clients(str(request.param), tmp_path)
    try:
        yield pair
    finally:
        for windows in set(pair):
            await windows.close()
        clean()


def limits(tenant: int, scope: int, *, scope_name: str = "s1",
           period_s: float = 60.0) -> tuple[RateLimit, RateLimit]:
    return (RateLimit("tenant:acme", tenant, period_s, "tenant", "acme"),
            RateLimit(f"scope:{scope_name}", scope, period_s, "scope", "acme"))


async def test_an_admit_counts_in_every_window_or_in_none(clients: Clients) -> None:
    first, second = clients
    tenant, scope = limits(tenant=3, scope=1)
    assert await first.admit((tenant, scope), NOW) is None
    # The scope is full: refused, and the tenant's window is not counted either.
    assert await second.admit((tenant, scope), NOW + 1) == scope
    assert await first.admit((tenant, scope), NOW + 2) == scope
    assert await second.admit((tenant,), NOW + 3) is None
    assert await first.admit((tenant,), NOW + 4) is None
    assert await second.admit((tenant,), NOW + 5) == tenant  # 3: the two refusals were not


async def test_the_first_full_window_in_the_order_given_is_named(clients: Clients) -> None:
    first, second = clients
    tenant, scope = limits(tenant=1, scope=1)
    assert await first.admit((tenant, scope), NOW) is None
    assert await second.admit((tenant, scope), NOW) == tenant
    assert await second.admit((scope, tenant), NOW) == scope


async def test_events_leave_the_window_after_the_period(clients: Clients) -> None:
    first, second = clients
    window = RateLimit("scope:slide", 2, 60.0, "scope")
    assert await first.admit((window,), NOW) is None
    assert await second.admit((window,), NOW + 1) is None
    assert await first.admit((window,), NOW + 59.9) == window
    # The first event leaves at NOW + 60 exactly: the window is (now - 60, now].
    assert await second.admit((window,), NOW + 60) is None
    assert await first.admit((window,), NOW + 60.5) == window
    assert await second.admit((window,), NOW + 121) is None


async def test_windows_are_per_key_and_per_period(clients: Clients) -> None:
    first, second = clients
    alice, bob = (RateLimit(f"scope:{name}", 1, 60.0, "scope") for name in ("alice", "bob"))
    assert await first.admit((alice,), NOW) is None
    assert await second.admit((bob,), NOW) is None
    assert await first.admit((alice,), NOW) == alice
    short = RateLimit("scope:short", 1, 0.5, "scope")
    assert await first.admit((short,), NOW) is None
    assert await second.admit((short,), NOW + 0.5) is None


async def test_an_admit_that_names_a_window_twice_or_no_time_is_refused(
        clients: Clients) -> None:
    first, _ = clients
    tenant, _scope = limits(tenant=5, scope=5)
    with pytest.raises(ValueError, match="twice"):
        await first.admit((tenant, tenant), NOW)
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite time"):
            await first.admit((tenant,), bad)
    assert await first.admit((), NOW) is None


def test_a_rate_limit_is_checked_when_built() -> None:
    for bad in ({"limit": 0}, {"limit": True}, {"period_s": 0.0}, {"period_s": math.nan},
                {"key": ""}):
        fields: dict[str, Any] = {"key": "k", "limit": 1, "period_s": 60.0, "label": "scope",
                                  **bad}
        with pytest.raises(ValueError):
            RateLimit(**fields)


async def test_the_shared_stores_say_so() -> None:
    from governed_memory_native.postgres.rates import PostgresRateWindows
    from governed_memory_native.sqlite.rates import SqliteRateWindows
    from governed_memory_redis.rates import RedisRateWindows

    assert ProcessRateWindows.shared is False
    for kind in (SqliteRateWindows, PostgresRateWindows, RedisRateWindows):
        assert kind.shared is True
        assert isinstance(kind.__new__(kind), RateWindows)


# -- atomicity under concurrency: a property over every store ----------------------------


ADMITS = st.lists(st.tuples(st.integers(0, 1), st.sampled_from(("a", "b", "c"))),
                  min_size=1, max_size=24)


@pytest.mark.parametrize("store", STORES)
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(admits=ADMITS, tenant_limit=st.integers(1, 12), scope_limit=st.integers(1, 6))
def test_concurrent_admits_are_those_of_some_serial_order(
        store: str, tmp_path: Path, admits: list[tuple[int, str]], tenant_limit: int,
        scope_limit: int) -> None:
    """All at one instant, from two clients at once: windows only fill, so a serial run
    ends with each window at most at its limit, each admitted event in both of its
    windows, and every refusal naming a window that is full at the end."""
    run = uuid.uuid4().hex  # every example its own windows

    def limits_for(scope: str) -> tuple[RateLimit, RateLimit]:
        return (RateLimit(f"{run}:tenant", tenant_limit, 60.0, "tenant", run),
                RateLimit(f"{run}:scope:{scope}", scope_limit, 60.0, "scope", run))

    async def main() -> list[RateLimit | None]:
        pair, clean = open_clients(store, tmp_path)
        try:
            # Connections open first, so the admits below overlap on the server.
            warm = RateLimit(f"{run}:warm", 1_000, 60.0, "scope", run)
            await asyncio.gather(*(pair[client].admit((warm,), NOW) for client in (0, 1)
                                   for _ in range(4)))
            return list(await asyncio.gather(*(
                pair[client].admit(limits_for(scope), NOW) for client, scope in admits)))
        finally:
            for windows in set(pair):
                await windows.close()
            clean()

    answers = asyncio.run(main())
    admitted = Counter(scope for (_, scope), answer in zip(admits, answers, strict=True)
                       if answer is None)
    total = sum(admitted.values())
    assert total <= tenant_limit
    assert all(count <= scope_limit for count in admitted.values())
    for (_, scope), answer in zip(admits, answers, strict=True):
        if answer is None:
            continue
        if answer.label == "tenant":
            assert total == tenant_limit, (answer, admitted)
        else:
            assert answer == limits_for(scope)[1] and admitted[scope] == scope_limit, \
                (answer, admitted)


# -- stores that cannot answer ---------------------------------------------------------


async def test_an_unreachable_postgres_raises_a_typed_error() -> None:
    from governed_memory_native.postgres.rates import PostgresRateWindows

    windows = PostgresRateWindows("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1",
                                  schema="gm_nowhere", busy_timeout_ms=100)
    try:
        with pytest.raises(MemoryUnavailableError):
            await windows.admit(limits(tenant=1, scope=1), NOW)
    finally:
        await windows.close()


async def test_an_unreachable_redis_raises_a_typed_error() -> None:
    from governed_memory_redis.rates import RedisRatesConfig, RedisRateWindows

    windows = RedisRateWindows(RedisRatesConfig(url="redis://127.0.0.1:1/0",
                                                connect_timeout_s=0.2, retries=0))
    try:
        with pytest.raises(MemoryUnavailableError, match="cannot be checked"):
            await windows.admit(limits(tenant=1, scope=1), NOW)
    finally:
        await windows.close()


async def test_a_sidecar_locked_past_the_busy_wait_raises_a_typed_error(
        tmp_path: Path) -> None:
    import sqlite3

    from governed_memory_native.sqlite.rates import SqliteRateWindows

    path = tmp_path / "memory.db-rates"
    windows = SqliteRateWindows(path, busy_timeout_ms=0)  # waits the minimum, then refuses
    try:
        assert await windows.admit(limits(tenant=5, scope=5), NOW) is None  # creates it
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(MemoryUnavailableError, match="lock"):
                await windows.admit(limits(tenant=5, scope=5), NOW)
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        assert await windows.admit(limits(tenant=5, scope=5), NOW) is None
    finally:
        await windows.close()


async def test_closed_windows_reopen_on_the_next_admit(clients: Clients) -> None:
    first, second = clients
    window = RateLimit("scope:reopen", 2, 60.0, "scope")
    assert await first.admit((window,), NOW) is None
    await first.close()
    assert await first.admit((window,), NOW) is None
    assert await second.admit((window,), NOW) == window
