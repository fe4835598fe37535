"""The port a search-cache store implements, and the errors it may raise.

A store keeps three things per tenant: a monotonic revision per *name* (a scope hash,
or the tenant epoch), the future expiry instants of records written to each scope
("expiry marks"), and cached entries. The wrapper never builds physical keys itself;
it hands the store the names, the request digest and the revisions it read, so every
store derives the same entry identity (:func:`entry_suffix`) and can check revisions
and write an entry in one atomic step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, runtime_checkable

import attrs


class CacheStoreError(Exception):
    """A store could not answer. The wrapper bypasses the cache; it never fails the read.

    ``reason`` is the stable word that ``memory.cache.bypassed`` events and the bypass
    counter report.
    """

    reason: ClassVar[str] = "store_error"


class CacheStoreTimeout(CacheStoreError):
    reason: ClassVar[str] = "timeout"


class CacheStoreUnavailable(CacheStoreError):
    reason: ClassVar[str] = "unavailable"


class CacheValueTooLarge(CacheStoreError):
    reason: ClassVar[str] = "oversized"


@attrs.frozen(slots=True)
class Lookup:
    """What one lookup saw, read atomically: the revisions of the names asked for (in
    order), the earliest expiry mark after ``now`` across them, and the entry stored
    under those revisions, if any."""

    revisions: tuple[int, ...]
    horizon: float | None
    value: bytes | None


@runtime_checkable
class CacheStore(Protocol):
    """Shared (or process-local) storage behind :class:`CachedMemoryProvider`.

    Contract:

    - ``revisions`` never go back: a name absent from the store reads as a value no
      entry of an earlier state was stored under, and every ``bump`` makes each name
      read strictly higher than before;
    - ``fill`` stores ``value`` under ``(digest, revisions)`` only if every name still
      reads exactly ``revisions`` — checked and written atomically — and returns
      whether it did;
    - with no names, ``lookup`` reads the entry stored under ``(digest, ())`` and
      ``fill`` stores one unconditionally: the caller has checked the revisions itself,
      against the provider's storage (``governed_memory.scope_revisions``);
    - ``bump`` raises every name's revision and records ``expiries`` as marks on each
      name in one atomic step, so no lookup sees the new revision without the marks;
    - every failure raises a :class:`CacheStoreError`.
    """

    name: str
    shared: bool
    """Whether every process of a deployment uses the same entries (Redis) or only this
    one does (in memory): an erasure receipt counts removed entries only for a shared
    store, the only one whose count covers every process."""

    async def lookup(self, tenant: str, names: Sequence[str], digest: str,
                     now: float) -> Lookup: ...

    async def fill(self, tenant: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool: ...

    async def bump(self, tenant: str, names: Sequence[str], expiries: Sequence[float],
                   now: float) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class ErasingCacheStore(Protocol):
    """A store that can remove one tenant's entries at once (``delete_user``). Without
    it an erasure still makes the tenant's entries unreachable (the epoch bump) and
    they age out by TTL, but the receipt cannot count them."""

    async def erase_tenant(self, tenant: str) -> int: ...


def entry_suffix(digest: str, revisions: Sequence[int]) -> str:
    """The entry's identity within its tenant: the digest and the revisions it was
    computed under. A bump changes the suffix, so old entries are never reached again
    and simply age out; nothing has to be deleted for an invalidation to hold."""
    return digest + ":" + ".".join(str(revision) for revision in revisions)


MARK_GRACE_S = 3600.0
"""How long an expiry mark is kept after its instant. A mark matters only to lookups
whose ``now`` is before it; the grace absorbs clock skew between processes."""
