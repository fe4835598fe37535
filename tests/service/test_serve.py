"""``governed-memory serve`` as a real process on a loopback port: writes through the
client are acknowledged, SIGTERM exits 0 after letting a request in flight finish, and
the database reopened afterwards holds every acknowledged write.

The command reaches ``governed-memory`` through the service plugin's
``register_cli_commands``, registered by pyproject's ``service`` entry point.
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
from governed_memory import Permission, Scope
from governed_memory_service import ApiKeyStore, AsyncMemoryClient
from service_support import ALL, free_port, stored_contents

SCOPE = Scope("acme", project_id="support", user_id="alice")
QUERY = "project_id=support&user_id=alice"


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "GOVERNED_MEMORY_HOME": str(root)}


@attrs.frozen(kw_only=True)
class Served:
    process: subprocess.Popen[str]
    url: str
    port: int
    token: str
    db: Path
    home: Path


def _token(keys: Path, permissions: list[Permission]) -> str:
    async def create() -> str:
        async with ApiKeyStore(keys) as store:
            issued = await store.create(tenant_id="acme", kind="user", user_id="alice",
                                        permissions=permissions)
            return issued.token

    return asyncio.run(create())


def _wait_until_up(process: subprocess.Popen[str], url: str) -> None:
    # Bounded polling for start-up (no assertion on how long it takes).
    for _ in range(600):
        if process.poll() is not None:
            raise AssertionError(f"serve exited {process.returncode}: "
                                 f"{process.stderr.read() if process.stderr else ''}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("serve did not come up")


GOVERNED_MEMORY = (sys.executable, "-m", "governed_memory.cli.main")
PROFILE_FILE = (Path(__file__).resolve().parents[2] / "profiles" / "governed_memory_profiles"
                / "local-1.0.0.toml")


@contextmanager
def _serving(tmp_path: Path, command: tuple[str, ...] = GOVERNED_MEMORY,
             profile: str = "local@1.0.0") -> Iterator[Served]:
    db, keys = tmp_path / "memory.db", tmp_path / "keys.db"
    token = _token(keys, ALL)
    port = free_port()
    env = _env(tmp_path)
    process = subprocess.Popen(
        [*command, "serve", "--profile", profile, "--db", str(db), "--keys", str(keys),
         "--port", str(port), "--shutdown-timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(process, url)
        yield Served(process=process, url=url, port=port, token=token, db=db, home=tmp_path)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with _serving(tmp_path) as running:
        yield running


def _stop(served: Served) -> int:
    served.process.send_signal(signal.SIGTERM)
    served.process.communicate(timeout=120)
    return served.process.returncode


def test_acknowledged_writes_survive_sigterm_and_the_exit_is_clean(served: Served) -> None:
    async def write() -> set[str]:
        async with AsyncMemoryClient(served.url, served.token) as client:
            records = await asyncio.gather(*(client.add(SCOPE, f"memory {i}")
                                             for i in range(20)))
            return {record.content for record in records}

    acknowledged = asyncio.run(write())
    assert len(acknowledged) == 20
    assert _stop(served) == 0
    assert acknowledged <= stored_contents(served.db, SCOPE)


def test_a_request_in_flight_when_sigterm_arrives_completes(served: Served) -> None:
    body = json.dumps({"content": "written while the server stops"}).encode()
    head = (f"POST /v1/tenants/acme/memories?{QUERY} HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{served.port}\r\n"
            f"Authorization: Bearer {served.token}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as conn:
        conn.sendall(head)
        # The server answers 100 Continue when the app first asks for the body: from
        # here on the request is being handled, and SIGTERM arrives in the middle of it.
        interim = conn.recv(1024)
        assert interim.startswith(b"HTTP/1.1 100"), interim
        served.process.send_signal(signal.SIGTERM)
        conn.sendall(body)
        # A stopping server answers with ``Connection: close``: read to the end.
        response = b""
        while chunk := conn.recv(65536):
            response += chunk
    assert response.startswith(b"HTTP/1.1 201"), response[:200]
    served.process.communicate(timeout=120)
    assert served.process.returncode == 0
    assert "written while the server stops" in stored_contents(served.db, SCOPE)


def test_serve_without_the_service_extra_names_the_extra(tmp_path: Path) -> None:
    # uvicorn made unimportable in a real child process: the command must say which
    # extra to install and exit non-zero, not fail with a traceback.
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'uvicorn' or name.startswith('uvicorn.'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from governed_memory.cli.main import cli\n"
        "cli(['serve', '--profile', 'local@1.0.0', '--db', sys.argv[1]])\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.db")],
                            capture_output=True, text=True, timeout=120,
                            env=_env(tmp_path))
    assert result.returncode != 0
    assert "governed-memory[service]" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_and_keys_are_governed_memory_subcommands(tmp_path: Path) -> None:
    env = _env(tmp_path)
    keys = str(tmp_path / "keys.db")
    listed = subprocess.run([sys.executable, "-m", "governed_memory.cli.main", "commands"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert {line.split()[0] for line in listed.stdout.splitlines()} >= {"serve", "keys"}
    created = subprocess.run(
        [sys.executable, "-m", "governed_memory.cli.main", "keys", "create", "--keys",
         keys, "--tenant", "acme", "--user", "alice", "--permission", "memory:read"],
        capture_output=True, text=True, env=env, timeout=120)
    assert created.returncode == 0, created.stderr
    key_id = json.loads(created.stdout.splitlines()[0])["key_id"]
    shown = subprocess.run([sys.executable, "-m", "governed_memory.cli.main", "keys", "list",
                            "--keys", keys], capture_output=True, text=True, env=env,
                           timeout=120)
    assert key_id in shown.stdout


def test_a_profile_file_and_the_module_entry_serve_too(tmp_path: Path) -> None:
    module = (sys.executable, "-m", "governed_memory_service")
    with _serving(tmp_path, module, str(PROFILE_FILE)) as served:
        async def write() -> str:
            async with AsyncMemoryClient(served.url, served.token) as client:
                return (await client.add(SCOPE, "from a profile file")).content

        assert asyncio.run(write()) == "from a profile file"
        assert _stop(served) == 0
    assert "from a profile file" in stored_contents(served.db, SCOPE)


JWT_PROFILE = """
spec_version = 1
id = "served"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "sqlite"

[stores.turns]
kind = "sqlite"

[stores.turns.config]
path = "{turns}"

[auth.jwt]
issuer = "https://id.test"
audience = "governed-memory"
algorithms = ["HS256"]
key_env = "SERVED_JWT_KEY"

[auth.jwt.claims]
tenant = "org"
user = "uid"
"""


def test_serve_verifies_jwts_as_the_profile_declares(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import jwt

    secret = "served-secret-" + "k" * 40
    profile = tmp_path / "served.toml"
    profile.write_text(JWT_PROFILE.format(turns=tmp_path / "turns.db"), encoding="utf-8")
    monkeypatch.setenv("SERVED_JWT_KEY", secret)
    token = jwt.encode({"iss": "https://id.test", "aud": "governed-memory", "sub": "user:al",
                        "org": "acme", "uid": "alice", "permissions": ["memory:read",
                                                                       "memory:write"],
                        "exp": int(time.time()) + 300}, secret, algorithm="HS256")
    with _serving(tmp_path, profile=str(profile)) as served:
        async def use() -> tuple[str, int]:
            async with AsyncMemoryClient(served.url, token) as client:
                record = await client.add(SCOPE, "through a profile's JWT settings")
                from governed_memory.tiers import TurnDraft

                session = Scope("acme", user_id="alice", session_id="s1")
                turn = await client.append(session, TurnDraft.user("hello"))
                return record.content, turn.seq

        assert asyncio.run(use()) == ("through a profile's JWT settings", 1)
        wrong = jwt.encode({"iss": "https://id.test", "aud": "governed-memory",
                            "sub": "x", "org": "acme", "exp": int(time.time()) + 300},
                           "another-" + secret, algorithm="HS256")
        refused = httpx.get(f"{served.url}/v1/tenants/acme/memories",
                            headers={"Authorization": f"Bearer {wrong}"}, timeout=30)
        assert refused.status_code == 401
        assert _stop(served) == 0


def test_serve_with_the_profiles_jwt_key_unset_stops_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = tmp_path / "served.toml"
    profile.write_text(JWT_PROFILE.format(turns=tmp_path / "turns.db"), encoding="utf-8")
    monkeypatch.delenv("SERVED_JWT_KEY", raising=False)
    result = subprocess.run(
        [*GOVERNED_MEMORY, "serve", "--profile", str(profile), "--db",
         str(tmp_path / "m.db"), "--keys", str(tmp_path / "keys.db"), "--port",
         str(free_port())], capture_output=True, text=True, env=_env(tmp_path),
        timeout=120)
    assert result.returncode != 0
    assert "auth.jwt.key_env (SERVED_JWT_KEY)" in result.stderr
    assert "Traceback" not in result.stderr
