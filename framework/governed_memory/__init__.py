"""governed-memory: scoped, authorized, policy-decided, traced and audited memory.

What an application uses; request classes, provider and policy contracts and the
rest of what plugin authors need live in named submodules (``governed_memory.requests``,
``governed_memory.provider``, ``governed_memory.policy``, ...).
"""

from __future__ import annotations

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryPolicyDeniedError,
    MemoryScopeError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.hookspecs import hookimpl
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.records import (
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    Provenance,
    RecordStatus,
    SearchHit,
    SearchResult,
    Visibility,
)
from governed_memory.scope import Scope, ScopeLevel, narrow
from governed_memory.version import __version__

__all__ = [
    "DeleteResult",
    "ErasureReceipt",
    "GovernedMemoryError",
    "GovernedMemoryManager",
    "MemoryConflictError",
    "MemoryNotFoundError",
    "MemoryPolicyDeniedError",
    "MemoryRecord",
    "MemoryScopeError",
    "MemoryType",
    "MemoryUnavailableError",
    "MemoryValidationError",
    "MemoryVersion",
    "Page",
    "Permission",
    "Principal",
    "PrincipalKind",
    "Provenance",
    "RecordStatus",
    "Scope",
    "ScopeLevel",
    "SearchHit",
    "SearchResult",
    "Visibility",
    "__version__",
    "hookimpl",
    "narrow",
]
