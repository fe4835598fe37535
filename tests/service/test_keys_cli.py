"""``python -m governed_memory_service keys ...``: the token is printed once, at
creation; listing shows bindings only; a revoked key no longer verifies."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from governed_memory_service.api_keys import ApiKeyStore
from governed_memory_service.cli import main


def test_create_list_revoke(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    runner = CliRunner()
    created = runner.invoke(main, ["keys", "create", "--keys", str(db), "--tenant", "acme",
                                   "--user", "alice", "--permission", "memory:read"])
    assert created.exit_code == 0, created.output
    issued = json.loads(created.stdout.splitlines()[0])
    assert issued["token"].startswith(f"gmk_{issued['key_id']}_")
    listed = runner.invoke(main, ["keys", "list", "--keys", str(db)])
    assert listed.exit_code == 0
    assert issued["key_id"] in listed.stdout
    assert issued["token"] not in listed.stdout
    # Key ids are hex; a secret may itself hold "_".
    secret = issued["token"].removeprefix("gmk_").partition("_")[2]
    with sqlite3.connect(db) as conn:
        stored = "".join(str(v) for row in conn.execute("SELECT * FROM api_keys")
                         for v in row)
    assert secret not in stored

    async def verify() -> bool:
        async with ApiKeyStore(db) as store:
            return await store.verify(issued["token"]) is not None

    assert asyncio.run(verify())
    revoked = runner.invoke(main, ["keys", "revoke", "--keys", str(db), issued["key_id"]])
    assert revoked.exit_code == 0
    assert not asyncio.run(verify())
    again = runner.invoke(main, ["keys", "revoke", "--keys", str(db), issued["key_id"]])
    assert again.exit_code != 0


def test_a_bad_binding_is_refused_before_a_key_exists(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["keys", "create", "--keys", str(tmp_path / "k.db"),
                                       "--tenant", "ac*me", "--permission", "memory:read"])
    assert result.exit_code != 0
    assert "tenant_id" in result.output


def test_reading_or_revoking_without_a_key_store_creates_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GOVERNED_MEMORY_HOME", raising=False)
    runner = CliRunner()
    for args in (["keys", "list"], ["keys", "revoke", "0123456789abcdef"],
                 ["keys", "list", "--keys", str(tmp_path / "missing" / "keys.db")]):
        result = runner.invoke(main, args)
        assert result.exit_code == 4, result.output
        assert "no key store at" in result.output
    assert list(tmp_path.iterdir()) == []
