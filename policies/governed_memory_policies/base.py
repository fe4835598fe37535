"""What every built-in policy shares: a revision that hashes its configuration, and a
factory contract that refuses ``policies.extra`` (built-ins read their own section)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.errors import MemoryConfigurationError


def config_revision(name: str, code_revision: str, settings: Any) -> str:
    """``<code revision>:<hash of the settings>``: changes when either could change a
    decision, so the policy set's revision in every event tells configurations apart."""
    body = canonical_json([name, code_revision, unstructure(settings)])
    return f"{code_revision}:{hashlib.sha256(body.encode('utf-8')).hexdigest()[:16]}"


def no_extra_config(name: str, section: str, config: Mapping[str, Any]) -> None:
    if config:
        raise MemoryConfigurationError(
            f"policy {name!r} is configured by the profile's [{section}] section, not by "
            f"[policies.extra.{name}]")
