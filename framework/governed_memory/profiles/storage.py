"""Where a profile keeps its memories: the provider, the stores other parts name, and
what stands around the provider (the indexing outbox, the search cache, the fallback).

These are declarations for the components that read them (the building in
``profiles.build``, the cache, the indexing worker); they are checked here so that a
profile written today keeps meaning the same thing. Whether a named store is read by
anything is a whole-profile rule, checked by ``MemoryProfileSpec``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

from governed_memory.profiles.problems import (
    ProfileProblem,
    check_at_least_one,
    check_positive,
    config_table,
)


@attrs.frozen(slots=True)
class ProviderSection:
    """Which registered provider stores the memories, and its own config table."""

    name: str = "native"
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=config_table)

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise ProfileProblem("name", "must name a registered provider")


STORE_NAMES: Final = frozenset({"blocks", "cache", "embedder", "language_model", "rates",
                                "turns", "working_state"})
"""The stores a profile may name: the search cache's (``[cache]``), the embedder
(vector search), the language model (``remember``), the write-rate windows' (``[quotas]
rate_store``), and the conversation, working-state and block tiers' stores."""


@attrs.frozen(slots=True)
class StoreSection:
    """A named backing store (a Redis for the cache, …) that other sections refer to."""

    kind: str
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=config_table)

    def __attrs_post_init__(self) -> None:
        if not self.kind:
            raise ProfileProblem("kind", "must name the kind of store")


class IndexingMode(enum.StrEnum):
    SYNC = "sync"
    ASYNC_OUTBOX = "async_outbox"


@attrs.frozen(slots=True)
class IndexingSection:
    mode: IndexingMode = IndexingMode.SYNC


class CacheStore(enum.StrEnum):
    MEMORY = "memory"
    REDIS = "redis"


@attrs.frozen(slots=True)
class CacheSection:
    enabled: bool = False
    store: CacheStore = CacheStore.MEMORY
    ttl_s: float = 60.0
    max_entries: int = 10_000

    def __attrs_post_init__(self) -> None:
        check_positive("ttl_s", self.ttl_s)
        check_at_least_one("max_entries", self.max_entries)


@attrs.frozen(slots=True)
class FallbackSection:
    """A provider to read from when the primary is unavailable (``None``: no fallback)."""

    provider: str | None = None
    config: Mapping[str, Any] = attrs.field(factory=dict, converter=config_table)

    def __attrs_post_init__(self) -> None:
        if self.provider is None and self.config:
            raise ProfileProblem("config", "configures a fallback but names no provider")
