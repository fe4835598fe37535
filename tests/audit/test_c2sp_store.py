"""``audit tiles`` over a trail kept in PostgreSQL (``--store``): the tiles are those of
the same trail exported as files, byte for byte, and the store's trail grows into them
incrementally like a file trail does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from actors import ALICE, ALICE_SCOPE
from click.testing import CliRunner, Result
from governed_memory import GovernedMemoryManager
from governed_memory.cli.main import cli
from governed_memory.sinks import build_sinks
from postgres_support import POSTGRES_DSN, drop_schemas, postgres_config, require_postgres_package
from trail_support import trail_profile

require_postgres_package()


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["audit", *map(str, args)])
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


async def _record(config: dict[str, object], adds: int) -> None:
    spec = trail_profile()
    async with GovernedMemoryManager.from_profile(
            spec, sinks=build_sinks(spec, provider_config_overrides=config),
            provider_config_overrides=config) as manager:
        for n in range(adds):
            await manager.add(ALICE, ALICE_SCOPE, f"note {n}")


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


def files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_tiles_from_the_store_are_the_tiles_of_its_export(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.chdir(tmp_path)
    config = postgres_config(tmp_path)
    store = ["--store", POSTGRES_DSN, "--schema", str(config["schema"])]
    run("keygen", "log.pem", "log.pub")
    asyncio.run(_record(config, 5))
    run("tiles", *store, "--sign", "log.pem", "--out", "from-store")
    asyncio.run(_record(config, 4))
    grown = run("tiles", *store, "--sign", "log.pem", "--out", "from-store")
    assert "at 18 entries (was 10)" in grown.stdout
    run("export", *store, "--out", "export")
    run("tiles", "export", "--sign", "log.pem", "--out", "from-files")
    assert files(tmp_path / "from-store") == files(tmp_path / "from-files")
