"""``governed-memory maintain`` and ``worker`` remove expired records of every scope: the
maintenance round's store-wide purge, in bounded governed batches, with no operator
naming a scope."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from governed_memory import Scope
from governed_memory.cli import indexing as cli_indexing
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.plugins import BLOCK_ENV, PluginManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.records import MemoryRecord
from governed_memory.requests import AddRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.storage.port import ReadTransaction

SCOPES = (Scope("acme", user_id="alice"), Scope("acme"), Scope("globex", user_id="bob"))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def run(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def _provider(db: Path, clock: ManualClock) -> NativeMemoryProvider:
    return build_native_provider({"backend": "sqlite", "path": str(db)}, clock)


async def _populate(db: Path) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """Records written an hour ago: some expired a minute ago (by the wall clock the
    commands read), some expiring in an hour, some never."""
    wall = time.time()
    clock = ManualClock(wall - 3600)
    provider = _provider(db, clock)
    await provider.start()
    expired, kept = [], []
    try:
        for n, scope in enumerate(SCOPES * 3):
            ctx = OperationContext(
                operation_id=f"op-{n}", now=clock.now(),
                principal=Principal("svc", PrincipalKind.SERVICE, scope.tenant_id,
                                    permissions=frozenset({Permission.ADMIN})))
            expired.append(await provider.add(AddRequest(
                scope=scope, content=f"short-lived {n}", expires_at=wall - 60 - n), ctx))
            kept.append(await provider.add(AddRequest(
                scope=scope, content=f"kept {n}", expires_at=wall + 3600 if n % 2 else None),
                ctx))
    finally:
        await provider.close()
    return expired, kept


async def _still_stored(db: Path, records: list[MemoryRecord]) -> list[bool]:
    provider = _provider(db, ManualClock())
    await provider.start()
    try:
        found = []
        for record in records:
            async def unit(tx: ReadTransaction, record: MemoryRecord = record
                           ) -> MemoryRecord | None:
                return await tx.records.get(record.scope_hash, record.id)

            found.append(await provider.backend.run_read(unit) is not None)
        return found
    finally:
        await provider.close()


def test_maintain_purges_expired_records_of_every_scope_in_batches(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    expired, kept = asyncio.run(_populate(db))
    report = json.loads(run("maintain", "--db", str(db), "--batch", "2", "--json").stdout)
    assert report["expired_records"] == len(expired)
    assert report["expired_batches"] == len(expired) // 2 + 1
    assert (report["capped"], report["skipped"]) == (False, [])
    assert asyncio.run(_still_stored(db, expired)) == [False] * len(expired)
    assert asyncio.run(_still_stored(db, kept)) == [True] * len(kept)
    assert run("maintain", "--db", str(db)).stdout.strip() == (
        "removed 0 expired retrieval snapshot(s) and 0 expired record(s)")


def test_maintain_stops_at_its_cap_and_the_next_round_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    expired, _ = asyncio.run(_populate(db))
    capped = run("maintain", "--db", str(db), "--batch", "2", "--max-records", "3").stdout
    assert "and 3 expired record(s) (this round's cap reached" in capped
    rest = run("maintain", "--db", str(db)).stdout
    assert f"and {len(expired) - 3} expired record(s)" in rest


def test_the_worker_purges_them_in_governed_batches(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    expired, kept = asyncio.run(_populate(db))
    sink = InMemoryEventSink()

    def open_manager(path: Path | None, profile: str | None = None) -> GovernedMemoryManager:
        return GovernedMemoryManager.from_profile(
            "chat-assistant", plugins=PluginManager.load(), sinks=[sink],
            provider_config_overrides={"path": str(path or db)})

    monkeypatch.setattr(cli_indexing, "_open_manager", open_manager)
    result = run("worker", "--db", str(db), "--once")
    assert f"and {len(expired)} expired record(s)" in result.stderr
    assert asyncio.run(_still_stored(db, expired)) == [False] * len(expired)
    assert asyncio.run(_still_stored(db, kept)) == [True] * len(kept)
    done = [event for event in sink.events if event.type == "memory.maintenance.completed"
            and event.operation == "purge_expired_all"]
    assert sum(event.count or 0 for event in done) == len(expired)
    assert {event.tenant_id for event in done} == {cli_indexing.STORE_TENANT}
    assert all(event.principal_id.startswith("cli:") for event in done)
