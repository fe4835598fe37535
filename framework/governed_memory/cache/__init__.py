"""The search cache: a read-through wrapper that is itself a provider, and its stores.

``CachedMemoryProvider(inner, store, ...)`` caches ``search`` and invalidates on every
write; ``InMemoryCacheStore`` is the bounded process-local store, and the Redis store
lives in ``governed_memory_redis``. ``attach_cache_events(provider, bus)`` sends the
cache events of a provider's caches to a host's bus. A hit gets a retrieval snapshot of
its own, recorded through the provider's ``replay`` accessor
(``governed_memory.replay.SnapshotReplay.record_snapshot``): an answer served from the
cache was computed by an earlier search, and replaying the later one must not report
the earlier operation. See ``docs/search-cache.md``.
"""

from governed_memory.cache.codec import CacheDecodeError, CachedSearch
from governed_memory.cache.keys import (
    EPOCH,
    KEY_SCHEMA,
    permission_boundary,
    revision_names,
    search_digest,
    tenant_tag,
)
from governed_memory.cache.memory_store import InMemoryCacheStore
from governed_memory.cache.provider import (
    CachedMemoryProvider,
    attach_cache_events,
    default_provider_revision,
)
from governed_memory.cache.rules import is_cacheable
from governed_memory.cache.signals import EVENT_TYPES, METER_NAME, OUTCOMES
from governed_memory.cache.store import (
    CacheStore,
    CacheStoreError,
    CacheStoreTimeout,
    CacheStoreUnavailable,
    CacheValueTooLarge,
    ErasingCacheStore,
    Lookup,
    entry_suffix,
)

__all__ = [
    "EPOCH",
    "EVENT_TYPES",
    "KEY_SCHEMA",
    "METER_NAME",
    "OUTCOMES",
    "CacheDecodeError",
    "CacheStore",
    "CacheStoreError",
    "CacheStoreTimeout",
    "CacheStoreUnavailable",
    "CacheValueTooLarge",
    "CachedMemoryProvider",
    "CachedSearch",
    "ErasingCacheStore",
    "InMemoryCacheStore",
    "Lookup",
    "attach_cache_events",
    "default_provider_revision",
    "entry_suffix",
    "is_cacheable",
    "permission_boundary",
    "revision_names",
    "search_digest",
    "tenant_tag",
]
