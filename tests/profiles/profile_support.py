"""Helpers for the profile tests: the installed plugins, and TOML written on the fly."""

from __future__ import annotations

import textwrap
from pathlib import Path

from governed_memory.plugins import PluginManager

BUILTIN = ("local@1.0.0", "chat-assistant@1.0.0", "agent-run@1.0.0",
           "compliance-strict@1.0.0")

MINIMAL = """
spec_version = 1
id = "tiny"
version = "1.0.0"
"""


def installed() -> PluginManager:
    """The plugins installed through entry points (native, policies, profiles)."""
    return PluginManager.load(blocked=[])


def write_toml(directory: Path, text: str, name: str = "profile.toml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
