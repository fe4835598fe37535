"""Entry points read from ``entry_points.txt`` directly agree with ``importlib.metadata``,
parse as setuptools writes them, and give way to it where they cannot read a path."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

from governed_memory import plugin_discovery
from governed_memory.hookspecs import ENTRY_POINT_GROUP


def _dist(site: Path, name: str, text: str, suffix: str = ".dist-info") -> None:
    info = site / f"{name}-1.0{suffix}"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(text, encoding="utf-8")


def test_this_environment_agrees_with_importlib_metadata() -> None:
    ours = sorted(plugin_discovery.entry_points(ENTRY_POINT_GROUP) or [])
    theirs = sorted({(ep.name, ep.value)
                     for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})
    assert ours == theirs
    assert ("native", "governed_memory_native.plugin") in ours


def test_sections_comments_extras_and_attributes_parse(tmp_path: Path) -> None:
    _dist(tmp_path, "acme", "# generated\n[console_scripts]\nacme = acme.cli:main\n\n"
                            f"[{ENTRY_POINT_GROUP}]\n; a comment\nacme = acme.plugin:hooks [fast]\n"
                            "other=acme.other\n")
    _dist(tmp_path, "old", f"[{ENTRY_POINT_GROUP}]\nold = old_plugin\n", suffix=".egg-info")
    found = plugin_discovery.entry_points(ENTRY_POINT_GROUP, [str(tmp_path)])
    assert sorted(found or []) == [("acme", "acme.plugin:hooks"), ("old", "old_plugin"),
                                   ("other", "acme.other")]


def test_the_first_path_entry_wins_a_name(tmp_path: Path) -> None:
    _dist(tmp_path / "a", "first", f"[{ENTRY_POINT_GROUP}]\nshared = first_plugin\n")
    _dist(tmp_path / "b", "second", f"[{ENTRY_POINT_GROUP}]\nshared = second_plugin\n")
    found = plugin_discovery.entry_points(ENTRY_POINT_GROUP,
                                          [str(tmp_path / "a"), str(tmp_path / "b")])
    assert found == [("shared", "first_plugin")]


def test_a_zip_on_the_path_hands_over_to_importlib_metadata(tmp_path: Path) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("x.py", "")
    assert plugin_discovery.entry_points(ENTRY_POINT_GROUP, [str(archive)]) is None
    assert plugin_discovery.entry_points(ENTRY_POINT_GROUP, [str(tmp_path / "gone")]) == []


def test_load_resolves_a_module_and_an_attribute_path() -> None:
    assert plugin_discovery.load("governed_memory.hookspecs:hookimpl") is not None
    module = plugin_discovery.load("governed_memory.plugin_discovery")
    assert module is plugin_discovery


def test_plugins_load_without_importing_importlib_metadata() -> None:
    code = ("import sys\n"
            "from governed_memory.plugins import PluginManager\n"
            "m = PluginManager.load()\n"
            "assert m.providers.get('native')\n"
            "print('importlib.metadata' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "False"
