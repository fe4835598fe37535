"""``governed-memory providers list`` describes each backend of the native provider
(SQLite, memory, PostgreSQL) with its capabilities, without psycopg and without a
server; what it declares for each backend is what that backend's provider says once
built; a provider that cannot be built without a config, or declares its variants
badly, is listed with the problem instead of stopping the listing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from governed_memory import hookimpl
from governed_memory.capabilities import Capabilities
from governed_memory.cli.main import cli
from governed_memory.clock import SystemClock
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import BLOCK_ENV, PluginManager

WITHOUT_PSYCOPG = '''
import runpy, sys

class Absent:
    """psycopg as if it were not installed: every import of it fails."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
sys.argv = ["governed-memory", *sys.argv[1:]]
runpy.run_module("governed_memory.cli.main", run_name="__main__")
'''


def _list_without_psycopg(tmp_path: Path, *args: str) -> str:
    env = {key: value for key, value in os.environ.items()
           if key not in (BLOCK_ENV, "GOVERNED_MEMORY_POSTGRES_DSN")}
    env["GOVERNED_MEMORY_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG, "providers", "list", *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []  # listing opened no database
    return done.stdout


def _native(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return next(row for row in rows if row["name"] == "native")


def test_native_backends_are_described_without_psycopg(tmp_path: Path) -> None:
    native = _native(json.loads(_list_without_psycopg(tmp_path, "--json")))
    assert "PostgreSQL" in native["description"]
    assert native["problems"] == []
    variants = {variant["name"]: variant for variant in native["variants"]}
    assert list(variants) == ["sqlite", "memory", "postgres"]
    assert {name: v["config"] for name, v in variants.items()} == {
        "sqlite": {"backend": "sqlite"}, "memory": {"backend": "memory"},
        "postgres": {"backend": "postgres"}}
    postgres = variants["postgres"]
    assert postgres["missing"] == "pip install 'governed-memory[postgres]'"
    assert variants["sqlite"]["missing"] is None
    declared = structure(postgres["capabilities"], Capabilities)  # strict: every field
    assert declared.durable and declared.multi_process and declared.transactional
    memory = structure(variants["memory"]["capabilities"], Capabilities)
    assert not memory.durable and not memory.multi_process
    # The provider's own line is still the default config's (SQLite's).
    assert native["capabilities"] == variants["sqlite"]["capabilities"]


def test_text_listing_names_each_backend_and_what_postgres_needs(tmp_path: Path) -> None:
    out = _list_without_psycopg(tmp_path)
    native = out[out.index("native  (plugin native)"):]
    assert 'backend = "sqlite": The default' in native
    assert 'backend = "memory"' in native
    assert "capabilities: as above, without durable, multi_process" in native
    postgres = next(line for line in native.splitlines() if 'backend = "postgres"' in line)
    assert "not installed here: pip install 'governed-memory[postgres]'" in postgres


def test_each_declaration_is_what_the_built_backend_says(tmp_path: Path) -> None:
    """The declarations are written down (so no driver is imported to list them); this
    holds them to the providers each backend builds (no I/O: nothing is started)."""
    registration = PluginManager.load().providers.get("native")
    variants = {variant["name"]: variant for variant in registration.factory.variants()}
    configs: dict[str, Mapping[str, Any]] = {
        "sqlite": {"backend": "sqlite", "path": str(tmp_path / "memory.db")},
        "memory": {"backend": "memory"},
        "postgres": {"backend": "postgres", "dsn": "postgresql://nobody@127.0.0.1:1/none"},
    }
    assert set(variants) == set(configs)
    for name, config in configs.items():
        assert dict(variants[name]["config"]).items() <= dict(config).items()
        built = registration.factory(config, SystemClock())
        assert built.capabilities() == variants[name]["capabilities"], name
    assert "missing" not in variants["postgres"]  # psycopg is a dev dependency


class _NeedsConfig:
    """A provider that cannot be built from an empty config, declaring one variant
    well and one badly."""

    def __init__(self, bad: bool) -> None:
        self.bad = bad

    def __call__(self, config: Mapping[str, Any], clock: Any) -> Any:
        raise MemoryConfigurationError("endpoint: required")

    def variants(self) -> list[Any]:
        good = {"name": "cloud", "config": {"region": "eu"}, "description": "Hosted.",
                "capabilities": Capabilities(durable=True, transactional=False)}
        return [good, {"name": "broken", "config": {}, "capabilities": "all"}] if self.bad \
            else [good]


def _plugin(bad: bool) -> object:
    class Plugin:
        @hookimpl
        def register_memory_providers(self, register: Callable[..., None]) -> None:
            register("acme", _NeedsConfig(bad), description="Acme memory")

    return Plugin()


@pytest.mark.parametrize("bad", [False, True])
def test_a_provider_that_needs_a_config_is_listed_with_why(
        monkeypatch: pytest.MonkeyPatch, bad: bool) -> None:
    load = PluginManager.load  # entry points off: only this plugin's provider
    only = _plugin(bad)
    monkeypatch.setattr(PluginManager, "load",
                        lambda *_, **__: load([only], entry_points=False))
    result = CliRunner().invoke(cli, ["providers", "list", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["capabilities"] is None
    assert row["problems"][0] == "not built without a config: endpoint: required"
    if bad:
        assert row["variants"] == []
        assert "its variants cannot be read: variant 'broken'" in row["problems"][1]
    else:
        assert row["variants"] == [{
            "name": "cloud", "config": {"region": "eu"}, "description": "Hosted.",
            "capabilities": unstructure(Capabilities(durable=True, transactional=False)),
            "missing": None}]
    text = CliRunner().invoke(cli, ["providers", "list"])
    assert text.exit_code == 0, text.output
    assert "acme  (plugin" in text.stdout
    assert "problem: not built without a config: endpoint: required" in text.stdout

