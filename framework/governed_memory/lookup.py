"""``lookup``: a ``get`` whose miss is an answer.

Components that look up a record they may not have written yet (the context builder's
session summary) would otherwise leave a rejected, ``not_found`` get in the trail for
every first turn, which an auditor reads as a failure. A lookup is its own operation
(``memory.read.completed`` with ``count`` 0 on a miss), so the trail tells a caller's
failed get from a component's expected miss.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING, ClassVar

import attrs

from governed_memory.errors import MemoryNotFoundError, MemoryStorageError
from governed_memory.operations import Operation
from governed_memory.records import MemoryRecord
from governed_memory.request import Audited, Checked, summarised
from governed_memory.requests import GetRequest, _Request
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.provider import MemoryProvider


@attrs.frozen(slots=True)
class Found(Audited):
    """The record a lookup found, or ``None``."""

    record: MemoryRecord | None = None

    def audit(self, allowed: Set[str]) -> Checked[Found]:
        record = self.record
        if record is None:
            return summarised(self, count=0)
        if record.scope_hash not in allowed or record.scope.scope_hash != record.scope_hash:
            raise MemoryStorageError("the provider answered a lookup with another scope's "
                                     "record")
        return summarised(self, record_ids=(record.id,), versions=(record.version,),
                          content_hashes=(record.content_hash,), count=1)


@attrs.frozen(slots=True, kw_only=True)
class LookupRequest(_Request[Found]):
    """A ``get`` whose miss is an answer (``Found(None)``), not an error."""

    operation: ClassVar[Operation] = Operation.LOOKUP

    scope: Scope
    record_id: str | None = None
    key: str | None = None

    def as_get(self) -> GetRequest:
        return GetRequest(scope=self.scope, record_id=self.record_id, key=self.key)

    def _validate(self) -> None:
        self.as_get()._validate()

    async def send(self, target: MemoryProvider, ctx: OperationContext) -> Found:
        try:
            record = await target.get(self.as_get(), ctx)
        except MemoryNotFoundError:
            return Found(None)
        return Found(record if record.is_visible(ctx.now) else None)
