"""``retention``: every memory gets a lifetime, and none outlives the maximum.

A new memory without ``expires_at`` gets ``now + ttl`` for its type (``ttl_by_type``,
else ``default_ttl_s``, else ``max_ttl_s``). A caller's ``expires_at`` beyond
``now + max_ttl_s`` is clamped, and so is an update that sets or clears the expiry:
no write, whoever makes it, leaves a memory that lives past the profile's maximum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec, RetentionSection
from governed_memory.requests import AddRequest, UpdateRequest

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import RETENTION


class RetentionPolicy:
    name = RETENTION

    def __init__(self, retention: RetentionSection) -> None:
        self.retention = retention
        self.revision = config_revision(self.name, "1", retention)

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request, now = check.request, check.now
        limit = None if self.retention.max_ttl_s is None else now + self.retention.max_ttl_s
        if isinstance(request, AddRequest):
            if request.expires_at is None:
                ttl = self.retention.ttl_for(request.memory_type)
                if ttl is not None:
                    return PolicyVerdict.transform(
                        attrs.evolve(request, expires_at=now + ttl),
                        f"expires after {ttl:g}s ({request.memory_type.value})")
            elif limit is not None and request.expires_at > limit:
                return PolicyVerdict.transform(attrs.evolve(request, expires_at=limit),
                                               "expires_at clamped to max_ttl_s")
        elif isinstance(request, UpdateRequest) and limit is not None:
            if request.clear_expires_at:
                return PolicyVerdict.transform(
                    attrs.evolve(request, clear_expires_at=False, expires_at=limit),
                    "an expiry cannot be cleared past max_ttl_s; set to the maximum")
            if request.expires_at is not None and request.expires_at > limit:
                return PolicyVerdict.transform(attrs.evolve(request, expires_at=limit),
                                               "expires_at clamped to max_ttl_s")
        return PolicyVerdict.allow()


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> RetentionPolicy:
    no_extra_config(RETENTION, "retention", config)
    return RetentionPolicy(profile.retention)
