"""``quotas``: how much a tenant and a scope may store, and how fast they may write.

Record and byte limits are checked against usage the provider reports (see
``governed_memory.usage``); a provider that cannot report usage, or a report that
fails, denies the write: a quota that cannot be checked is not silently skipped.
Limits are checked before the write, so two concurrent writes near a limit can both
pass; a quota is a bound on growth, not a transactional constraint.

Writes per minute count adds and updates in a sliding window per tenant and per scope,
in this process; appended conversation turns and working-state updates count too (they
are writes to the same tenant and scope), though they are not part of the stored-record
usage. Deletes, reviews and erasure are never rate-limited: refusing to forget is worse
than storing too fast.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from governed_memory.limits import utf8_size
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec, QuotaSection
from governed_memory.requests import AddRequest, UpdateRequest
from governed_memory.tiers.requests import AppendTurnRequest, UpdateWorkingStateRequest
from governed_memory.usage import Usage, UsageQuery

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import QUOTAS
from governed_memory_policies.rate_window import SlidingWindow

log = logging.getLogger(__name__)

_RATED = frozenset({Operation.ADD, Operation.UPDATE})
_RATED_TIER = frozenset({Operation.APPEND_TURN, Operation.UPDATE_WORKING_STATE})


class QuotaPolicy:
    name = QUOTAS

    def __init__(self, quotas: QuotaSection) -> None:
        self.quotas = quotas
        self.revision = config_revision(self.name, "1", quotas)
        self._tenant_rate = (None if quotas.writes_per_minute_per_tenant is None
                             else SlidingWindow(quotas.writes_per_minute_per_tenant))
        self._scope_rate = (None if quotas.writes_per_minute_per_scope is None
                            else SlidingWindow(quotas.writes_per_minute_per_scope))

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request = check.request
        if check.operation in _RATED_TIER and isinstance(
                request, AppendTurnRequest | UpdateWorkingStateRequest):
            return self._rate(request, check.now)
        if check.operation not in _RATED or not isinstance(request, AddRequest | UpdateRequest):
            return PolicyVerdict.allow()
        refused = await self._storage_refusal(check, request)
        if refused is not None:
            return PolicyVerdict.deny(refused)
        return self._rate(request, check.now)

    async def _storage_refusal(self, check: PolicyCheck,
                               request: AddRequest | UpdateRequest) -> str | None:
        q = self.quotas
        adding = 1 if isinstance(request, AddRequest) else 0
        # An update's new content is counted in full (the old size is not known here):
        # near a byte limit, updates are refused a little early rather than late.
        size = 0 if request.content is None else utf8_size(request.content, "content")
        tenant_id = request.scope.tenant_id
        for label, query, max_records, max_bytes in (
            ("tenant", UsageQuery(tenant_id), q.max_records_per_tenant, q.max_bytes_per_tenant),
            ("scope", UsageQuery(tenant_id, request.scope), q.max_records_per_scope,
             q.max_bytes_per_scope),
        ):
            if max_records is None and max_bytes is None:
                continue
            if check.usage is None:
                return "usage cannot be determined for this provider; quota enforced"
            try:
                usage = await check.usage(query)
            except Exception as exc:  # unknown usage denies: never fail open
                log.warning("usage report failed (%s); denying", type(exc).__name__)
                return "usage could not be read; quota enforced"
            refused = _over(label, usage, adding, size, max_records, max_bytes)
            if refused is not None:
                return refused
        return None

    def _rate(self, request: AddRequest | UpdateRequest | AppendTurnRequest
              | UpdateWorkingStateRequest, now: float) -> PolicyVerdict:
        windows = [(w, key, label) for w, key, label in (
            (self._tenant_rate, request.scope.tenant_id, "tenant"),
            (self._scope_rate, request.scope.scope_hash, "scope"),
        ) if w is not None]
        for window, key, label in windows:
            if not window.would_admit(key, now):
                return PolicyVerdict.deny(f"{label} write rate above {window.limit} "
                                          "per minute")
        for window, key, _ in windows:
            window.admit(key, now)
        return PolicyVerdict.allow()


def _over(label: str, usage: Usage, adding: int, size: int, max_records: int | None,
          max_bytes: int | None) -> str | None:
    if max_records is not None and adding and usage.records + adding > max_records:
        return f"{label} record quota of {max_records} reached"
    if max_bytes is not None and size and usage.bytes + size > max_bytes:
        return f"{label} byte quota of {max_bytes} would be exceeded"
    return None


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> QuotaPolicy:
    no_extra_config(QUOTAS, "quotas", config)
    return QuotaPolicy(profile.quotas)
