"""API keys in PostgreSQL (issue 29): their own schema, never the memory tables; a
revocation reaches every process within the cache's time-to-live (at most 1 s), at a
cost of one point read per request or less; ``--keys`` names the store for every
command. Real PostgreSQL, a private schema per test."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from governed_memory import Permission
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryUnavailableError,
)
from governed_memory_service.cli import main
from governed_memory_service.key_stores import key_store_location, refuse_memory_schema
from governed_memory_service.postgres_keys import MAX_CACHE_TTL_S, PostgresApiKeyStore
from postgres_support import (
    POSTGRES_DSN,
    drop_schemas,
    require_postgres,
    require_postgres_package,
    schema_for,
)

require_postgres_package()

READ = [Permission.READ]


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture
def schema(tmp_path: Path) -> str:
    require_postgres()
    return schema_for(tmp_path) + "_keys"


class Clock:
    """Monotonic seconds a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _tables_of(schema: str) -> set[str]:
    import psycopg

    with psycopg.connect(POSTGRES_DSN) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables"
                            " WHERE table_schema = %s", (schema,)).fetchall()
    return {str(row[0]) for row in rows}


async def test_keys_live_in_their_own_schema_and_only_a_hash_is_kept(schema: str) -> None:
    async with PostgresApiKeyStore(POSTGRES_DSN, schema=schema) as store:
        issued = await store.create(tenant_id="acme", kind="user", user_id="alice",
                                    permissions=READ, label="ops")
        principal = await store.verify(issued.token)
        assert principal is not None and principal.tenant_id == "acme"
        assert [k.key_id for k in await store.list(tenant_id="acme")] == [issued.key.key_id]
        assert await store.list(tenant_id="globex") == ()
        assert await store.verify(issued.token[:-1] + "x") is None
    assert _tables_of(schema) == {"api_keys"}
    secret = issued.token.removeprefix("gmk_").partition("_")[2]
    import psycopg

    with psycopg.connect(POSTGRES_DSN) as conn:
        stored = conn.execute(psycopg.sql.SQL("SELECT * FROM {}.api_keys").format(
            psycopg.sql.Identifier(schema))).fetchall()
    assert secret not in "".join(str(v) for row in stored for v in row)


async def test_a_revocation_reaches_another_process_once_its_cache_entry_ages_out(
        schema: str) -> None:
    clock = Clock()
    node_a = PostgresApiKeyStore(POSTGRES_DSN, schema=schema, clock=clock)
    node_b = PostgresApiKeyStore(POSTGRES_DSN, schema=schema)
    async with node_a, node_b:
        issued = await node_b.create(tenant_id="acme", kind="user", user_id="alice",
                                     permissions=READ)
        assert await node_a.verify(issued.token) is not None
        assert await node_b.verify(issued.token) is not None  # cached in node B too
        assert await node_b.revoke(issued.key.key_id)
        assert await node_b.verify(issued.token) is None  # the revoking node: at once
        # Node A holds what it read for less than its time-to-live (<= 1 s) ...
        clock.now += node_a.cache_ttl_s / 2
        assert await node_a.verify(issued.token) is not None
        # ... and no longer: the next request reads the revocation.
        clock.now += node_a.cache_ttl_s / 2
        assert await node_a.verify(issued.token) is None
        assert node_a.stats.reads == 2
        assert node_a.cache_ttl_s <= MAX_CACHE_TTL_S


async def test_a_request_costs_one_point_read_or_less(schema: str) -> None:
    clock = Clock()
    async with PostgresApiKeyStore(POSTGRES_DSN, schema=schema, clock=clock) as store:
        issued = await store.create(tenant_id="acme", kind="user", user_id="alice",
                                    permissions=READ)
        # 50 concurrent requests with a key nobody has read yet share one read.
        found = await asyncio.gather(*(store.verify(issued.token) for _ in range(50)))
        assert all(p is not None for p in found)
        assert store.stats.reads == 1
        for _ in range(20):
            await store.verify(issued.token)
        assert store.stats.reads == 1 and store.stats.lookups == 70
        clock.now += store.cache_ttl_s
        await store.verify(issued.token)
        assert store.stats.reads == 2
        # Made-up key ids are never cached: each is one read, and none evicts a real key.
        for _ in range(3):
            assert await store.verify("gmk_0123456789abcdef_nope") is None
        assert store.stats.reads == 5


def test_a_cache_longer_than_the_revocation_bound_is_refused() -> None:
    require_postgres_package()
    with pytest.raises(MemoryConfigurationError, match="within a second"):
        PostgresApiKeyStore(POSTGRES_DSN, cache_ttl_s=MAX_CACHE_TTL_S + 0.5)


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_keys_commands_take_a_postgresql_uri(schema: str) -> None:
    uri = f"{POSTGRES_DSN}?schema={schema}"
    # Reading or revoking before any key exists is "no key store" and creates nothing.
    code, _, err = _cli("keys", "list", "--keys", uri)
    assert code == 4 and "no key store" in err
    assert _tables_of(schema) == set()
    code, out, _ = _cli("keys", "create", "--keys", uri, "--tenant", "acme", "--user",
                        "alice", "--permission", "memory:read")
    assert code == 0
    issued = json.loads(out.splitlines()[0])
    code, out, _ = _cli("keys", "list", "--keys", uri)
    assert code == 0 and issued["key_id"] in out and issued["token"] not in out
    assert _cli("keys", "revoke", "--keys", uri, issued["key_id"])[0] == 0
    assert _cli("keys", "revoke", "--keys", uri, issued["key_id"])[0] != 0

    async def verify() -> bool:
        async with PostgresApiKeyStore(POSTGRES_DSN, schema=schema) as store:
            return await store.verify(issued["token"]) is not None

    assert not asyncio.run(verify())


PG_PROFILE = """
spec_version = 1
id = "pg-keys"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "postgres"
dsn = "{dsn}"
schema = "{schema}"
"""


def test_keys_profile_names_the_profiles_database_beside_its_memories(
        tmp_path: Path) -> None:
    require_postgres()
    memory_schema = schema_for(tmp_path)
    profile = tmp_path / "pg.toml"
    profile.write_text(PG_PROFILE.format(dsn=POSTGRES_DSN, schema=memory_schema))
    location = key_store_location("profile", profile=str(profile))
    assert location.schema == memory_schema + "_keys"
    code, out, err = _cli("keys", "create", "--keys", "profile", "--profile", str(profile),
                          "--tenant", "acme", "--kind", "service", "--permission",
                          "memory:admin")
    assert code == 0, err
    assert _tables_of(memory_schema + "_keys") == {"api_keys"}
    assert json.loads(out.splitlines()[0])["key_id"] in _cli(
        "keys", "list", "--keys", "profile", "--profile", str(profile))[1]
    # The memory schema itself is refused as the key store's.
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import resolve_profile

    spec = resolve_profile(str(profile), PluginManager.load())
    with pytest.raises(MemoryConfigurationError, match="schema of their own"):
        refuse_memory_schema(key_store_location(f"{POSTGRES_DSN}?schema={memory_schema}"),
                             spec)
    # A profile on SQLite keeps no PostgreSQL database.
    code, _, err = _cli("keys", "list", "--keys", "profile", "--profile", "local@1.0.0")
    assert code == 7 and "no PostgreSQL database" in err


def test_an_unreachable_store_is_unavailable_and_never_shows_the_password() -> None:
    require_postgres_package()
    uri = "postgresql://someone:s3cret-pw@127.0.0.1:1/test?schema=nowhere_keys&connect_timeout=1"
    location = key_store_location(uri)
    assert "s3cret-pw" not in location.describe() and "s3cret-pw" not in repr(location)
    assert "s3cret-pw" not in repr(location.store())
    result = subprocess.run(
        [sys.executable, "-m", "governed_memory_service", "keys", "list"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "GOVERNED_MEMORY_KEYS": uri})
    assert result.returncode == 9, result.stderr
    assert "unavailable" in result.stderr and "s3cret-pw" not in result.stderr + result.stdout

    async def verify() -> None:
        store = PostgresApiKeyStore(location.dsn or "", schema="nowhere_keys", timeout_s=1)
        try:
            await store.verify("gmk_0123456789abcdef_secret")
        finally:
            await store.close()

    with pytest.raises(MemoryUnavailableError):
        asyncio.run(verify())


def test_a_keys_value_that_is_no_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MemoryConfigurationError, match="is no key store"):
        key_store_location("mysql://db/keys")
    with pytest.raises(MemoryConfigurationError, match="is a directory"):
        key_store_location(str(tmp_path))
    with pytest.raises(MemoryConfigurationError, match="lower-case PostgreSQL identifier"):
        key_store_location(f"{POSTGRES_DSN}?schema=Bad-Name")
    assert key_store_location(str(tmp_path / "k.db")).path == tmp_path / "k.db"
