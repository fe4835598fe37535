"""``lookup``: a ``get`` whose miss is an answer.

Components that look up a record they may not have written yet (the context builder's
session summary) would otherwise leave a rejected, ``not_found`` get in the trail for
every first turn, which an auditor reads as a failure. A lookup is its own operation
(``memory.read.completed`` with ``count`` 0 on a miss), so the trail tells a caller's
failed get from a component's expected miss.
"""

from __future__ import annotations

import attrs

from governed_memory.errors import MemoryStorageError
from governed_memory.records import MemoryRecord
from governed_memory.tiers.results import TierAudit, TierResult


@attrs.frozen(slots=True)
class Found(TierResult):
    """The record a lookup found, or ``None``."""

    record: MemoryRecord | None = None

    def audit(self, allowed: set[str]) -> TierAudit:
        record = self.record
        if record is None:
            return TierAudit(self, count=0)
        if record.scope_hash not in allowed or record.scope.scope_hash != record.scope_hash:
            raise MemoryStorageError("the provider answered a lookup with another scope's "
                                     "record")
        return TierAudit(self, record_ids=(record.id,), versions=(record.version,),
                         content_hashes=(record.content_hash,), count=1)
