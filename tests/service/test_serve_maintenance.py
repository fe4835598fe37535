"""``governed-memory serve`` runs the maintenance round by itself (``--maintain-every``):
a served store loses its expired records of every scope without a separate worker."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from governed_memory import Scope
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.requests import AddRequest
from governed_memory_native import build_native_provider
from governed_memory_native.storage.port import ReadTransaction
from governed_memory_service.serve import DEFAULT_MAINTAIN_EVERY_S, ServeOptions, server_parts

SCOPE = Scope("acme", user_id="alice")


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))


def _options(db: Path, **fields: float) -> ServeOptions:
    return ServeOptions(profile="local@1.0.0", db=db, keys=None, host="127.0.0.1", port=0,
                        shutdown_timeout=1, **fields)  # type: ignore[arg-type]


def test_the_interval_reaches_every_worker_and_zero_turns_it_off(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    default = _options(db)
    assert default.maintain_every_s == DEFAULT_MAINTAIN_EVERY_S
    assert ServeOptions.from_json(_options(db, maintain_every_s=7.5).to_json()) == \
        _options(db, maintain_every_s=7.5)
    manager, _keys, _jwt = server_parts(_options(db, maintain_every_s=7.5))
    assert manager.maintenance_interval_s == 7.5
    manager, _keys, _jwt = server_parts(_options(db, maintain_every_s=0))
    assert manager.maintenance_interval_s is None
    help_text = CliRunner().invoke(cli, ["serve", "--help"]).stdout
    assert "--maintain-every" in help_text and "expired records of every scope" in help_text


async def test_a_served_manager_purges_expired_records_by_itself(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    wall = time.time()
    clock = ManualClock(wall - 3600)
    provider = build_native_provider({"backend": "sqlite", "path": str(db)}, clock)
    await provider.start()
    ctx = OperationContext(operation_id="op-1", now=clock.now(), principal=Principal(
        "svc", PrincipalKind.SERVICE, "acme", permissions=frozenset({Permission.ADMIN})))
    try:
        expired = await provider.add(AddRequest(scope=SCOPE, content="short-lived",
                                                expires_at=wall - 60), ctx)
        kept = await provider.add(AddRequest(scope=SCOPE, content="kept"), ctx)
    finally:
        await provider.close()

    async def stored(record_id: str) -> bool:
        async def unit(tx: ReadTransaction) -> bool:
            return await tx.records.get(SCOPE.scope_hash, record_id) is not None

        reader = build_native_provider({"backend": "sqlite", "path": str(db)}, clock)
        await reader.start()
        try:
            return await reader.backend.run_read(unit)
        finally:
            await reader.close()

    manager, _keys, _jwt = server_parts(_options(db, maintain_every_s=0.05))
    async with manager:
        for _ in range(400):  # bounded wait for the background round (no timing asserted)
            if not await stored(expired.id):
                break
            await asyncio.sleep(0.05)
    assert not await stored(expired.id)
    assert await stored(kept.id)
