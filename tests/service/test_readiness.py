"""``/healthz`` (the process answers) and ``/readyz`` (storage, event sinks and the key
store answer) are separate (issue 29): readiness makes a real round trip to each, and
anything down is ``503`` with ``Retry-After``, as is a request that needs it; never a
401 or a 500. PostgreSQL "goes down" behind a TCP forwarder the test cuts, so the real
server other tests share keeps running."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from governed_memory import GovernedMemoryManager, Permission
from governed_memory.events import InMemoryEventSink, JsonLinesEventSink
from governed_memory_service import ApiKeyStore, BearerAuthenticator, create_app
from governed_memory_service.postgres_keys import PostgresApiKeyStore
from postgres_support import (
    POSTGRES_DSN,
    drop_schemas,
    postgres_config,
    require_postgres,
    require_postgres_package,
    schema_for,
)
from tcp_proxy import TcpProxy

ALL = [Permission.READ, Permission.WRITE, Permission.DELETE]
MEMORIES = "/v1/tenants/acme/memories"


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    require_postgres()
    target = urlsplit(POSTGRES_DSN)
    forwarder = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    forwarder.start()
    yield forwarder
    forwarder.close()


def _through(proxy: TcpProxy) -> str:
    parts = urlsplit(POSTGRES_DSN)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    return parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host
                          ).geturl()


async def _http(app: Any, token: str | None = None) -> httpx.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url="http://service.test", headers=headers,
                             transport=httpx.ASGITransport(app=app))


@pytest.fixture
async def sqlite_keys(tmp_path: Path) -> AsyncIterator[ApiKeyStore]:
    async with ApiKeyStore(tmp_path / "keys.db") as keys:
        yield keys


async def test_readiness_names_every_check(tmp_path: Path, sqlite_keys: ApiKeyStore) -> None:
    sinks = [JsonLinesEventSink(tmp_path / "events.jsonl"), InMemoryEventSink()]
    manager = GovernedMemoryManager.from_plugins(
        "native", {"backend": "sqlite", "path": str(tmp_path / "memory.db")}, sinks=sinks)
    async with manager:
        app = create_app(manager, BearerAuthenticator(sqlite_keys))
        async with await _http(app) as http:
            ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready", "provider": "native",
        "checks": {"storage": "ok", "keys": "ok",
                   "sinks": [{"name": "jsonl", "status": "ok"},
                             {"name": "memory", "status": "unchecked"}]}}
    assert not (tmp_path / "events.jsonl").exists()  # a check records nothing


async def test_a_sink_that_cannot_record_makes_the_app_unready_not_dead(
        tmp_path: Path, sqlite_keys: ApiKeyStore) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    manager = GovernedMemoryManager.from_plugins(
        "native", {"backend": "memory"}, sinks=[JsonLinesEventSink(blocker / "events.jsonl")])
    async with manager:
        app = create_app(manager, BearerAuthenticator(sqlite_keys))
        async with await _http(app) as http:
            alive = await http.get("/healthz")
            ready = await http.get("/readyz")
    assert alive.status_code == 200
    assert ready.status_code == 503 and ready.headers["Retry-After"] == "5"
    assert ready.json()["checks"]["sinks"] == [{"name": "jsonl", "status": "unavailable"}]
    assert str(tmp_path) not in ready.text


async def test_a_key_store_that_is_down_is_503_with_retry_after_then_recovers(
        tmp_path: Path, proxy: TcpProxy) -> None:
    require_postgres_package()
    keys = PostgresApiKeyStore(_through(proxy), schema=schema_for(tmp_path) + "_keys",
                               timeout_s=2)
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
    async with manager, keys:
        issued = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                   permissions=ALL)
        app = create_app(manager, BearerAuthenticator(keys))
        async with await _http(app, issued.token) as http:
            assert (await http.get(MEMORIES, params={"user_id": "alice"})).status_code == 200
            proxy.cut()
            ready = await http.get("/readyz")
            assert ready.status_code == 503 and ready.headers["Retry-After"] == "5"
            assert ready.json()["checks"] == {"storage": "ok", "sinks": [],
                                              "keys": "unavailable"}
            # Past the key's cache entry, a request cannot be authenticated: 503, not
            # 401 (the key is valid) and not 500.
            keys.cache_ttl_s = 0
            refused = await http.get(MEMORIES, params={"user_id": "alice"})
            assert refused.status_code == 503, refused.text
            assert refused.headers["Retry-After"] == "5"
            assert refused.json()["code"] == "unavailable"
            assert str(proxy.port) not in refused.text
            proxy.restore()
            # Broken pooled connections are replaced as they fail: bounded attempts.
            statuses = []
            for _ in range(20):
                statuses.append((await http.get("/readyz")).status_code)
                if statuses[-1] == 200:
                    break
            assert statuses[-1] == 200, statuses
            assert (await http.get(MEMORIES, params={"user_id": "alice"})).status_code == 200


async def test_storage_that_is_down_makes_the_app_unready(
        tmp_path: Path, proxy: TcpProxy, sqlite_keys: ApiKeyStore) -> None:
    config = {**postgres_config(tmp_path), "dsn": _through(proxy), "busy_timeout_ms": 1000}
    manager = GovernedMemoryManager.from_plugins("native", config)
    async with manager:
        issued = await sqlite_keys.create(tenant_id="acme", kind="user", user_id="alice",
                                          permissions=ALL)
        app = create_app(manager, BearerAuthenticator(sqlite_keys))
        async with await _http(app, issued.token) as http:
            assert (await http.get("/readyz")).status_code == 200
            proxy.cut()
            ready = await http.get("/readyz")
            assert ready.status_code == 503 and ready.headers["Retry-After"] == "5"
            assert ready.json()["checks"]["storage"] == "unavailable"
            write = await http.post(MEMORIES, params={"user_id": "alice"},
                                    json={"content": "while the database is down"})
            assert write.status_code == 503 and write.headers["Retry-After"] == "5"
            proxy.restore()
