"""Issue 28, defect 1, as the trial ran it: two ``governed-memory serve`` processes and
the CLI on one SQLite store, under the built-in ``chat-assistant`` profile, whose search
cache lives in each process's memory. After any acknowledged write or erasure, by
either server or by the CLI, no server answers a search with what it cached before.

Each server's cache checks every page against the scope revisions the store keeps, so
this holds without any message between the processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from governed_memory import Permission, Scope
from governed_memory_service import ApiKeyStore, AsyncMemoryClient

PROFILE = "chat-assistant@1.0.0"
SCOPE = Scope("acme", project_id="support", user_id="alice")
BOB = Scope("acme", project_id="support", user_id="bob")
CLI = (sys.executable, "-m", "governed_memory.cli.main")
ALL = [Permission.READ, Permission.WRITE, Permission.DELETE, Permission.ADMIN]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _token(keys: Path) -> str:
    async def create() -> str:
        async with ApiKeyStore(keys) as store:
            issued = await store.create(tenant_id="acme", kind="service", permissions=ALL)
            return issued.token

    return asyncio.run(create())


@contextmanager
def _server(home: Path, db: Path, keys: Path) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [*CLI, "serve", "--profile", PROFILE, "--db", str(db), "--keys", str(keys),
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "GOVERNED_MEMORY_HOME": str(home)})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # bounded polling for start-up, no timing asserted
            if process.poll() is not None:
                raise AssertionError(f"serve exited {process.returncode}: "
                                     f"{process.stderr.read() if process.stderr else ''}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("serve did not come up")
        yield url
    finally:
        process.terminate()
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def _cli(home: Path, db: Path, *args: str) -> dict[str, object]:
    done = subprocess.run([*CLI, "--profile", PROFILE, *args, "--db", str(db), "--json"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GOVERNED_MEMORY_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    value: dict[str, object] = json.loads(done.stdout)
    return value


def test_no_server_serves_a_page_cached_before_a_write_or_erasure_anywhere(
        tmp_path: Path) -> None:
    db, keys = tmp_path / "memory.db", tmp_path / "keys.db"
    token = _token(keys)
    with ExitStack() as servers:
        urls = [servers.enter_context(_server(tmp_path, db, keys)) for _ in range(2)]
        asyncio.run(_exercise(tmp_path, db, urls, token))


async def _exercise(home: Path, db: Path, urls: list[str], token: str) -> None:
    rng = random.Random(28)
    expected: dict[str, str] = {}  # record id -> content of alice's live memories
    bob_expected: set[str] = set()
    clients = [AsyncMemoryClient(url, token) for url in urls]
    checks = stale = 0

    async def check_everywhere() -> None:
        nonlocal checks, stale
        for client in clients:
            for _ in range(2):  # the second search of a pair is a cache hit if cached
                found = {hit.record.content for hit in
                         (await client.search(SCOPE, "tea", limit=50)).hits}
                checks += 1
                if found != set(expected.values()):
                    stale += 1
            bob = {hit.record.content for hit in
                   (await client.search(BOB, "tea", limit=50)).hits}
            assert bob == bob_expected, "another user's page changed"

    try:
        await check_everywhere()
        for step in range(24):
            where = rng.choice(("a", "b", "cli"))
            ids = sorted(expected)
            if ids and step % 4 == 3:
                record_id = rng.choice(ids)
                content = f"tea note {step} revised"
                if where == "cli":
                    _cli(home, db, "update", "--tenant", "acme", "--project", "support",
                         "--user", "alice", record_id, content)
                else:
                    await clients[where == "b"].update(SCOPE, record_id, content=content)
                expected[record_id] = content
            elif ids and step % 4 == 2:
                record_id = rng.choice(ids)
                if where == "cli":
                    _cli(home, db, "delete", "--tenant", "acme", "--project", "support",
                         "--user", "alice", record_id)
                else:
                    await clients[where == "b"].delete(SCOPE, record_id)
                del expected[record_id]
            else:
                content = f"tea note {step}"
                if where == "cli":
                    made = _cli(home, db, "add", "--tenant", "acme", "--project", "support",
                                "--user", "alice", content)
                    record_id = str(made["id"])
                else:
                    record_id = (await clients[where == "b"].add(SCOPE, content)).id
                expected[record_id] = content
            if step == 5:
                await clients[0].add(BOB, "bob drinks tea")
                bob_expected.add("bob drinks tea")
            await check_everywhere()
        # The trial's erasure: the CLI erases alice while both servers hold her pages.
        receipt = _cli(home, db, "delete-user", "--tenant", "acme", "--user", "alice",
                       "--yes")
        counts = receipt["counts"]
        assert isinstance(counts, dict)
        # The CLI's cache is its own memory: it cannot count the servers' pages.
        assert "cached_searches" not in counts
        expected.clear()
        await check_everywhere()
        # And an erasure through one server, seen by the other.
        made = await clients[1].add(SCOPE, "tea after the erasure")
        expected[made.id] = made.content
        await check_everywhere()
        await clients[0].delete_user("acme", "alice")
        expected.clear()
        await check_everywhere()
    finally:
        for client in clients:
            await client.aclose()
    print(f"\n[cache across processes] checks={checks} stale={stale}")
    assert checks > 100 and stale == 0
