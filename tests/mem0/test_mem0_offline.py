"""The offline import: telemetry off, and the mem0ai package even behind a shadow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from governed_memory.errors import MemoryConfigurationError

SCRIPT = """
import os, sys
sys.path.insert(0, {shadow!r})
{before}
from governed_memory_mem0.offline import import_mem0
module = import_mem0(None)
import mem0.memory.telemetry as telemetry
print(hasattr(module, "Memory"), telemetry.MEM0_TELEMETRY, os.environ["MEM0_TELEMETRY"])
"""


def run(tmp_path: Path, before: str = "") -> subprocess.CompletedProcess[str]:
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / "mem0.py").write_text("raise SystemExit('the shadow was imported')\n")
    env = {"PATH": "/usr/bin:/bin", "MEM0_DIR": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-c", SCRIPT.format(shadow=str(shadow),
                                                               before=before)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_the_package_is_imported_offline_even_behind_a_shadowing_module(
    tmp_path: Path
) -> None:
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]


def test_mem0_imported_with_telemetry_on_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, before=(
        "os.environ['MEM0_TELEMETRY'] = 'True'\n"
        "sys.path.pop(0)\nimport mem0\nsys.path.insert(0, 'x')"))
    assert done.returncode != 0
    assert "telemetry on" in done.stderr


def test_a_shadow_already_imported_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from governed_memory_mem0 import offline

    monkeypatch.setitem(sys.modules, "mem0", types.ModuleType("mem0"))
    with pytest.raises(MemoryConfigurationError, match="not the mem0ai package"):
        offline.import_mem0(None)
