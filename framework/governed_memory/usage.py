"""How much a tenant or a scope stores, so quotas can be decided before a write.

Usage is read from the provider, not counted in process: counters kept beside the
provider drift as soon as a second process writes, a record expires or a user is
erased. A provider that cannot report usage does not declare the ``usage`` capability,
and a quota on records or bytes then denies every write (it never guesses).

A provider offers usage through its ``usage_meter`` accessor (a :class:`UsageMeter`, or
``None``), like its other optional features; the activity port asks the accessor, never
the provider's attributes, so a wrapper (the search cache, the read fallback) answers
with its inner provider's meter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from governed_memory.limits import check_identifier
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext


@attrs.frozen(slots=True)
class UsageQuery:
    """Usage of one exact scope (``scope`` set) or of a whole tenant (``scope`` None)."""

    tenant_id: str
    scope: Scope | None = None

    def __attrs_post_init__(self) -> None:
        check_identifier(self.tenant_id, "tenant_id")
        if self.scope is not None and self.scope.tenant_id != self.tenant_id:
            raise ValueError("a usage query's scope belongs to its tenant")


@attrs.frozen(slots=True)
class Usage:
    """Records that count against a quota and the UTF-8 bytes of their content.

    Counted: every record that is neither deleted nor expired, including records held
    for review (they occupy storage and may become visible).
    """

    records: int
    bytes: int


UsageProbe = Callable[[UsageQuery], Awaitable[Usage]]
"""What a policy calls to learn current usage; the activity port binds it to the
provider of the operation being decided."""


@runtime_checkable
class UsageMeter(Protocol):
    """The ``usage`` capability: what a provider's ``usage_meter`` accessor returns.

    ``usage`` counts, in storage, the records of one exact scope (``query.scope``) or of
    the whole tenant (``query.scope`` is ``None``) that are neither deleted nor expired,
    ``pending_review`` ones included, and the UTF-8 bytes of their content (not
    metadata, provenance or versions). Read from storage on every call: quotas decide
    on it.
    """

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage: ...
