"""Memory blocks: named, size-bounded texts an agent reads and edits, always in its prompt.

Letta's core memory, on the tiers: a profile declares each block (``[blocks.persona]``,
``[blocks.human]``) with a size limit, the scope level it lives at and the text it starts
with. An agent edits a block with three verbs (``replace`` one exact passage, ``append``
a line, ``rethink`` the whole text), each a compare-and-set on the block's version, so
two agents editing one block never lose an edit: the second is refused with a conflict,
or (when the caller did not name a version) re-applied on the newer text. Every version
is kept, so a block's history reads like a memory's, and the context builder places
every declared block in the prompt on every turn.

A store keeps versions, not blocks: version ``n`` of a block exists only if ``n - 1``
does, and writing version ``n`` when it already exists is a conflict, which is what
makes compare-and-set hold across processes and nodes with nothing more than a primary
key. A block never written reads as version 0 with its declared initial text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Protocol, runtime_checkable

import attrs

from governed_memory.errors import MemoryConflictError, MemoryStorageError
from governed_memory.request import Audited, Checked, summarised
from governed_memory.scope import Scope

MAX_BLOCK_CHARS = 50_000
"""The largest limit a profile may give a block (a prompt has to hold them all)."""
MAX_BLOCKS = 32
"""The most blocks one profile may declare."""
MAX_BLOCK_HISTORY_PAGE = 100


class BlockEdit:
    """The kinds of write a version records (plain strings, stored as they are)."""

    REPLACE = "replace"
    APPEND = "append"
    RETHINK = "rethink"
    KINDS = frozenset({REPLACE, APPEND, RETHINK})


@attrs.frozen(slots=True)
class BlockVersion:
    """One stored version of one block in one exact scope."""

    scope_hash: str
    name: str
    version: int
    value: str
    edit: str
    updated_at: float


@attrs.frozen(slots=True)
class Block(Audited):
    """A block as an agent sees it: the newest version's text, or the declared initial
    text at version 0, with the limit an edit must stay within."""

    scope_hash: str
    name: str
    value: str
    version: int
    limit: int
    description: str = ""
    updated_at: float | None = None

    @property
    def chars(self) -> int:
        return len(self.value)

    def audit(self, allowed: Set[str]) -> Checked[Block]:
        _own(self.scope_hash, allowed)
        return summarised(self, versions=(self.version,), count=1)


@attrs.frozen(slots=True)
class BlockSet(Audited):
    """Every requested block of one scope, in the order the profile declares them."""

    scope_hash: str
    blocks: tuple[Block, ...]

    def get(self, name: str) -> Block | None:
        return next((b for b in self.blocks if b.name == name), None)

    def audit(self, allowed: Set[str]) -> Checked[BlockSet]:
        _own(self.scope_hash, allowed)
        for block in self.blocks:
            _own(block.scope_hash, allowed)
        return summarised(self, versions=tuple(b.version for b in self.blocks),
                          count=len(self.blocks))


@attrs.frozen(slots=True)
class BlockHistory(Audited):
    """Versions of one block, newest first."""

    scope_hash: str
    name: str
    versions: tuple[BlockVersion, ...]

    def audit(self, allowed: Set[str]) -> Checked[BlockHistory]:
        _own(self.scope_hash, allowed)
        for version in self.versions:
            _own(version.scope_hash, allowed)
        return summarised(self, versions=tuple(v.version for v in self.versions),
                          count=len(self.versions))


@attrs.frozen(slots=True)
class BlocksErased(Audited):
    """How many block versions erasing one user removed."""

    scope_hash: str
    removed: int

    def audit(self, allowed: Set[str]) -> Checked[BlocksErased]:
        _own(self.scope_hash, allowed)
        return summarised(self, count=self.removed)


def _own(scope_hash: str, allowed: Set[str]) -> None:
    if scope_hash not in allowed:
        raise MemoryStorageError("the block store answered for another scope")


def stale(name: str, expected: int, current: int) -> MemoryConflictError:
    """The one conflict every store raises, so callers and tests see one message."""
    return MemoryConflictError(
        f"block {name!r} is at version {current}, not {expected}: read it again and "
        "re-apply the edit")


@runtime_checkable
class BlockStore(Protocol):
    """Where block versions live, per exact scope. Stores register through
    ``register_block_stores``; ``governed_memory_conformance`` holds the contract."""

    name: str
    durable: bool

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        """The newest stored version of each named block that has one."""
        ...

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> BlockVersion:
        """Store version ``expected_version + 1`` atomically, or raise
        ``MemoryConflictError`` (via :func:`stale`) when the newest stored version is
        not ``expected_version`` (0: the block has never been written)."""
        ...

    async def history(self, scope: Scope, name: str, *, before_version: int | None,
                      limit: int) -> tuple[BlockVersion, ...]:
        """Up to ``limit`` versions, newest first, all older than ``before_version``
        when it is given."""
        ...

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        """Remove every version of every block of one user (any scope carrying that
        tenant and user); returns how many versions went."""
        ...


class InMemoryBlockStore:
    """Block versions in a dict (``durable = False``): tests and demos, one process."""

    name = "memory"
    durable = False
    revision = "1"

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], list[BlockVersion]] = {}
        self._owners: dict[str, tuple[str, str | None]] = {}

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        found: dict[str, BlockVersion] = {}
        for name in names:
            versions = self._versions.get((scope.scope_hash, name))
            if versions:
                found[name] = versions[-1]
        return found

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> BlockVersion:
        versions = self._versions.setdefault((scope.scope_hash, name), [])
        current = versions[-1].version if versions else 0
        if current != expected_version:
            raise stale(name, expected_version, current)
        written = BlockVersion(scope.scope_hash, name, current + 1, value, edit, now)
        versions.append(written)
        self._owners[scope.scope_hash] = (scope.tenant_id, scope.user_id)
        return written

    async def history(self, scope: Scope, name: str, *, before_version: int | None,
                      limit: int) -> tuple[BlockVersion, ...]:
        versions = self._versions.get((scope.scope_hash, name), [])
        older = [v for v in versions if before_version is None or v.version < before_version]
        return tuple(reversed(older[-limit:])) if limit > 0 else ()

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        removed = 0
        for key in list(self._versions):
            if self._owners.get(key[0]) == (tenant_id, user_id):
                removed += len(self._versions.pop(key))
        return removed
