"""``governed-memory serve --workers N`` as real processes (issue 29): the workers share
one port; SIGTERM to the parent drains every worker and loses no acknowledged write; the
audit trail they share stays one chain with every write in it once; a worker that dies
is restarted, a crash loop stops the parent with a report, and workers never outlive
their parent. Waits are bounded counts of polls, never time limits on the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx
import pytest
from governed_memory import Scope
from governed_memory_service import AsyncMemoryClient
from postgres_support import (
    POSTGRES_DSN,
    drop_schemas,
    require_postgres,
    require_postgres_package,
    schema_for,
)
from service_support import ALL, free_port, stored_contents

SCOPE = Scope("acme", project_id="support", user_id="alice")
QUERY = "project_id=support&user_id=alice"
GOVERNED_MEMORY = (sys.executable, "-m", "governed_memory.cli.main")


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


def _children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _poll(condition: object, what: str, attempts: int = 600) -> None:
    """Bounded polling (no assertion on how long anything takes)."""
    assert callable(condition)
    for _ in range(attempts):
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


@attrs.frozen(kw_only=True)
class Served:
    process: subprocess.Popen[str]
    url: str
    port: int
    token: str
    home: Path
    log: Path

    def stderr(self) -> str:
        return self.log.read_text()


def _token(keys: str) -> str:
    async def create() -> str:
        from governed_memory_service.key_stores import key_store_location

        async with key_store_location(keys).store() as store:
            issued = await store.create(tenant_id="acme", kind="user", user_id="alice",
                                        permissions=ALL)
            return issued.token

    return asyncio.run(create())


@contextmanager
def _serving(home: Path, *extra: str, profile: str = "local@1.0.0",
             keys: str | None = None, db: Path | None = None) -> Iterator[Served]:
    keys = keys or str(home / "keys.db")
    token = _token(keys)
    port = free_port()
    command = [*GOVERNED_MEMORY, "serve", "--profile", profile, "--keys", keys,
               "--port", str(port), "--workers", "2", "--shutdown-timeout", "60", *extra]
    if db is not None:
        command += ["--db", str(db)]
    log = home / "serve.log"
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=sink, text=True,
                                   env={**os.environ, "GOVERNED_MEMORY_HOME": str(home)})
    served = Served(process=process, url=f"http://127.0.0.1:{port}", port=port, token=token,
                    home=home, log=log)
    try:
        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"serve exited {process.returncode}: {served.stderr()}")
            return "2 workers ready" in served.stderr()

        _poll(up, "two workers ready")
        yield served
    finally:
        if process.poll() is None:
            for child in _children(process.pid):
                os.kill(child, signal.SIGKILL)
            process.kill()
        process.wait()


def _stop(served: Served) -> tuple[int, str]:
    served.process.send_signal(signal.SIGTERM)
    served.process.wait(timeout=180)
    return served.process.returncode, served.stderr()


def _add_many(served: Served, count: int, clients: int = 8) -> set[str]:
    """``count`` adds over ``clients`` connections (each its own, so the kernel hands
    them to either worker); the contents acknowledged."""
    async def write() -> set[str]:
        async def one_client(index: int) -> list[str]:
            async with AsyncMemoryClient(served.url, served.token) as client:
                return [(await client.add(SCOPE, f"memory {index}-{i}")).content
                        for i in range(count // clients)]

        done = await asyncio.gather(*(one_client(i) for i in range(clients)))
        return {content for batch in done for content in batch}

    return asyncio.run(write())


@pytest.mark.parametrize("listen_mode", ["reuseport", "shared"])
def test_two_workers_serve_one_port_and_sigterm_loses_no_acknowledged_write(
        tmp_path: Path, listen_mode: str) -> None:
    db = tmp_path / "memory.db"  # created and migrated by the parent, before any worker
    with _serving(tmp_path, "--listen-mode", listen_mode, db=db) as served:
        assert f"({listen_mode} socket;" in served.stderr()
        workers = _children(served.process.pid)
        acknowledged = _add_many(served, 64)
        assert len(acknowledged) == 64
        assert _children(served.process.pid) == workers  # nobody died under the load
        code, err = _stop(served)
        assert code == 0, err
        assert "every worker stopped cleanly" in err
        assert not any(_alive(pid) for pid in workers)
    assert acknowledged <= stored_contents(db, SCOPE)
    # Both workers appended to one hash-chained trail, under its lock: it verifies, and
    # it holds each acknowledged write's commit exactly once.
    verified = subprocess.run([*GOVERNED_MEMORY, "audit", "verify", str(tmp_path / "audit")],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    committed: dict[str, int] = {}
    for path in sorted((tmp_path / "audit").glob("audit-*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line).get("event") or {}
            if event.get("type") == "memory.write.committed":
                for record_id in event.get("record_ids", []):
                    committed[record_id] = committed.get(record_id, 0) + 1
    assert len(committed) == 64 and set(committed.values()) == {1}


def test_a_request_in_flight_when_the_parent_gets_sigterm_completes(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with _serving(tmp_path, db=db) as served:
        body = json.dumps({"content": "written while the workers stop"}).encode()
        head = (f"POST /v1/tenants/acme/memories?{QUERY} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{served.port}\r\n"
                f"Authorization: Bearer {served.token}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Expect: 100-continue\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", served.port), timeout=60) as conn:
            conn.sendall(head)
            # 100 Continue: a worker's app is reading the body, so the request is being
            # handled when the parent is told to stop and passes SIGTERM on.
            assert conn.recv(1024).startswith(b"HTTP/1.1 100")
            served.process.send_signal(signal.SIGTERM)
            conn.sendall(body)
            response = b""
            while chunk := conn.recv(65536):
                response += chunk
        assert response.startswith(b"HTTP/1.1 201"), response[:200]
        served.process.wait(timeout=180)
        assert served.process.returncode == 0, served.stderr()
    assert "written while the workers stop" in stored_contents(db, SCOPE)


def test_a_worker_that_dies_is_restarted_and_a_crash_loop_stops_the_parent(
        tmp_path: Path) -> None:
    with _serving(tmp_path, "--max-restarts", "1", "--restart-window", "3600") as served:
        first = _children(served.process.pid)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        _poll(lambda: len(_children(served.process.pid) - first) == 1, "a new worker")
        _poll(lambda: httpx.get(f"{served.url}/readyz", timeout=5).status_code == 200,
              "ready again")
        assert _add_many(served, 8, clients=4)
        # A second death within the window is one more than --max-restarts 1 allows.
        (survivor,) = first - {victim}
        os.kill(survivor, signal.SIGKILL)
        served.process.wait(timeout=180)
        err = served.stderr()
        assert served.process.returncode == 1
        assert "crash loop: 2 worker exits within 3600 s" in err
        assert "killed by SIGKILL after it was ready" in err
        assert not _children(served.process.pid)


def test_workers_stop_when_their_parent_is_gone(tmp_path: Path) -> None:
    with _serving(tmp_path) as served:
        workers = _children(served.process.pid)
        served.process.kill()  # no chance to drain them: they notice on their own
        served.process.wait()
        _poll(lambda: not any(_alive(pid) for pid in workers), "the orphans stopped")


def test_a_profile_that_cannot_start_stops_before_any_worker(tmp_path: Path) -> None:
    profile = tmp_path / "jwt.toml"
    profile.write_text('spec_version = 1\nid = "j"\nversion = "1.0.0"\n[provider]\n'
                       'name = "native"\n[auth.jwt]\nissuer = "https://id.test"\n'
                       'audience = "gm"\nalgorithms = ["HS256"]\nkey_env = "UNSET_GM_KEY"\n')
    env = {k: v for k, v in os.environ.items() if k != "UNSET_GM_KEY"}
    result = subprocess.run(
        [*GOVERNED_MEMORY, "serve", "--profile", str(profile), "--db",
         str(tmp_path / "m.db"), "--keys", str(tmp_path / "keys.db"), "--workers", "2",
         "--port", str(free_port())], capture_output=True, text=True, timeout=120,
        env={**env, "GOVERNED_MEMORY_HOME": str(tmp_path)})
    assert result.returncode == 7
    assert "auth.jwt.key_env (UNSET_GM_KEY)" in result.stderr
    assert "listening" not in result.stderr and "Traceback" not in result.stderr


PG_PROFILE = """
spec_version = 1
id = "pg-workers"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "postgres"
dsn = "{dsn}"
schema = "{schema}"
"""


def test_workers_on_postgresql_share_the_keys_and_a_revocation(tmp_path: Path) -> None:
    require_postgres_package()
    require_postgres()
    profile = tmp_path / "pg.toml"
    profile.write_text(PG_PROFILE.format(dsn=POSTGRES_DSN, schema=schema_for(tmp_path)))
    keys = f"{POSTGRES_DSN}?schema={schema_for(tmp_path)}_keys"
    with _serving(tmp_path, profile=str(profile), keys=keys) as served:
        assert len(_add_many(served, 16, clients=4)) == 16
        listed = subprocess.run([*GOVERNED_MEMORY, "keys", "list", "--keys", keys],
                                capture_output=True, text=True, timeout=120)
        (key_id,) = [json.loads(line)["key_id"] for line in listed.stdout.splitlines()]
        revoked = subprocess.run([*GOVERNED_MEMORY, "keys", "revoke", "--keys", keys, key_id],
                                 capture_output=True, text=True, timeout=120)
        assert revoked.returncode == 0, revoked.stderr

        def refused_by_every_connection() -> bool:
            # Fresh connections, so either worker may answer; both must refuse.
            statuses = {httpx.get(f"{served.url}/v1/tenants/acme/memories?{QUERY}",
                                  headers={"Authorization": f"Bearer {served.token}"},
                                  timeout=10).status_code for _ in range(8)}
            return statuses == {401}

        _poll(refused_by_every_connection, "the revocation seen by both workers", 100)
        # MCP over HTTP is served by every worker too, authenticated the same way.
        mcp = httpx.post(f"{served.url}/mcp", headers={
            "Authorization": f"Bearer {served.token}", "Accept":
            "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
        assert mcp.status_code == 401
        code, err = _stop(served)
        assert code == 0, err


def test_mcp_over_http_answers_from_every_worker(tmp_path: Path) -> None:
    with _serving(tmp_path) as served:
        headers = {"Authorization": f"Bearer {served.token}",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18"}
        for index in range(6):  # a new connection each: the workers share them
            called = httpx.post(f"{served.url}/mcp", headers=headers, timeout=30, json={
                "jsonrpc": "2.0", "id": index, "method": "tools/call",
                "params": {"name": "remember",
                           "arguments": {"content": f"mcp memory {index}"}}})
            assert called.status_code == 200, called.text
            assert not called.json()["result"].get("isError"), called.text
        code, err = _stop(served)
        assert code == 0, err
