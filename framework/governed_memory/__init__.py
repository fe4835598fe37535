"""governed-memory: scoped, authorized, policy-decided, traced and audited memory.

What an application uses; request classes, provider and policy contracts and the
rest of what plugin authors need live in named submodules (``governed_memory.requests``,
``governed_memory.provider``, ``governed_memory.policy``, ...).

The names below are imported on first use (PEP 562), not when the package is: the
manager pulls in asyncio, OpenTelemetry and the profile model, and a plugin module or
``governed-memory --help`` that only needs ``hookimpl`` or ``__version__`` should not
pay for them. ``from governed_memory import GovernedMemoryManager`` works as it always
did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports
from governed_memory.version import __version__

if TYPE_CHECKING:
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

_HOMES = {
    "governed_memory.errors": ("GovernedMemoryError", "MemoryConflictError",
                               "MemoryNotFoundError", "MemoryPolicyDeniedError",
                               "MemoryScopeError", "MemoryUnavailableError",
                               "MemoryValidationError"),
    "governed_memory.hookspecs": ("hookimpl",),
    "governed_memory.manager": ("GovernedMemoryManager",),
    "governed_memory.principal": ("Permission", "Principal", "PrincipalKind"),
    "governed_memory.records": ("DeleteResult", "ErasureReceipt", "MemoryRecord", "MemoryType",
                                "MemoryVersion", "Page", "Provenance", "RecordStatus",
                                "SearchHit", "SearchResult", "Visibility"),
    "governed_memory.scope": ("Scope", "ScopeLevel", "narrow"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)


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
