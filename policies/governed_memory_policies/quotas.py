"""``quotas``: how much a tenant and a scope may store, and how fast they may write.

Record and byte limits are checked against usage the provider reports (see
``governed_memory.usage``); a provider that cannot report usage, or a report that
fails, denies the write: a quota that cannot be checked is not silently skipped.
Limits are checked before the write, so two concurrent writes near a limit can both
pass; a quota is a bound on growth, not a transactional constraint.

Writes per minute count adds and updates in a sliding window per tenant and per scope;
appended conversation turns and working-state updates count too (they are writes to the
same tenant and scope), though they are not part of the stored-record usage. Deletes,
reviews and erasure are never rate-limited: refusing to forget is worse than storing too
fast. The windows are not the policy's: the activity port hands it the ones the profile
chose (``PolicyCheck.rate_windows``, ``[quotas] rate_store``), kept where every worker
process and node counts into them when the store is shared, so a limit means the same
with 1 or 8 workers. One write is counted in the tenant's and the scope's window in one
atomic step, or in neither; windows that cannot be checked (none given, the store down)
deny the write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from governed_memory.converter import unstructure
from governed_memory.limits import utf8_size
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import RATE_STORE_PROVIDER, MemoryProfileSpec, QuotaSection
from governed_memory.rates import RateLimit
from governed_memory.requests import AddRequest, UpdateRequest
from governed_memory.tiers.block_requests import EditBlockRequest
from governed_memory.tiers.requests import AppendTurnRequest, UpdateWorkingStateRequest
from governed_memory.usage import Usage, UsageQuery

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import QUOTAS

log = logging.getLogger(__name__)

_RATED = frozenset({Operation.ADD, Operation.UPDATE})
_RATED_TIER = frozenset({Operation.APPEND_TURN, Operation.UPDATE_WORKING_STATE,
                         Operation.EDIT_BLOCK})
PERIOD_S = 60.0
"""The window of the writes-per-minute limits."""


class QuotaPolicy:
    name = QUOTAS

    def __init__(self, quotas: QuotaSection) -> None:
        self.quotas = quotas
        self.revision = config_revision(self.name, "1", _revision_settings(quotas))

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request = check.request
        if check.operation in _RATED_TIER and isinstance(
                request, AppendTurnRequest | UpdateWorkingStateRequest | EditBlockRequest):
            return await self._rate(check, request)
        if check.operation not in _RATED or not isinstance(request, AddRequest | UpdateRequest):
            return PolicyVerdict.allow()
        refused = await self._storage_refusal(check, request)
        if refused is not None:
            return PolicyVerdict.deny(refused)
        return await self._rate(check, request)

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

    async def _rate(self, check: PolicyCheck, request: AddRequest | UpdateRequest
                    | AppendTurnRequest | UpdateWorkingStateRequest
                    | EditBlockRequest) -> PolicyVerdict:
        limits = self.rate_limits(request.scope.tenant_id, request.scope.scope_hash)
        if not limits:
            return PolicyVerdict.allow()
        if check.rate_windows is None:
            return PolicyVerdict.deny("write rate cannot be checked here; quota enforced")
        try:
            refused = await check.rate_windows.admit(limits, check.now)
        except Exception as exc:  # a window that cannot be checked denies: never fail open
            log.warning("rate windows failed (%s); denying", type(exc).__name__)
            return PolicyVerdict.deny("write rate could not be checked; quota enforced")
        if refused is not None:
            return PolicyVerdict.deny(f"{refused.label} write rate above {refused.limit} "
                                      "per minute")
        return PolicyVerdict.allow()

    def rate_limits(self, tenant_id: str, scope_hash: str) -> tuple[RateLimit, ...]:
        """The windows one write to a scope counts in, tenant first: every manager with
        the same windows (the same store) counts a tenant's and a scope's writes in one
        window each, whichever process or node it runs in."""
        q = self.quotas
        limits = []
        if q.writes_per_minute_per_tenant is not None:
            limits.append(RateLimit(f"wpm:tenant:{tenant_id}", q.writes_per_minute_per_tenant,
                                    PERIOD_S, "tenant", tenant_id))
        if q.writes_per_minute_per_scope is not None:
            limits.append(RateLimit(f"wpm:scope:{scope_hash}", q.writes_per_minute_per_scope,
                                    PERIOD_S, "scope", tenant_id))
        return tuple(limits)


def _over(label: str, usage: Usage, adding: int, size: int, max_records: int | None,
          max_bytes: int | None) -> str | None:
    if max_records is not None and adding and usage.records + adding > max_records:
        return f"{label} record quota of {max_records} reached"
    if max_bytes is not None and size and usage.bytes + size > max_bytes:
        return f"{label} byte quota of {max_bytes} would be exceeded"
    return None


def _revision_settings(quotas: QuotaSection) -> dict[str, Any]:
    """The section as the revision hashes it: ``rate_store`` only when it is not the
    default, so every profile written before it keeps its policy revision."""
    settings: dict[str, Any] = unstructure(quotas)
    if quotas.rate_store == RATE_STORE_PROVIDER:
        del settings["rate_store"]
    return settings


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> QuotaPolicy:
    no_extra_config(QUOTAS, "quotas", config)
    return QuotaPolicy(profile.quotas)
