"""``permissions``: per-operation permissions a profile demands beyond the fixed rule.

The fixed scope rule already demands each operation's own permission (``memory:write``
for an add). A profile can ask for more, say ``delete = "memory:admin"`` so that only
administrators delete; it can never ask for less, because the fixed rule runs first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import AccessSection, MemoryProfileSpec

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import PERMISSIONS


class PermissionsPolicy:
    name = PERMISSIONS

    def __init__(self, access: AccessSection) -> None:
        self.access = access
        self.revision = config_revision(self.name, "1", access)

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        required = self.access.permissions.get(check.operation)
        if required is None or check.principal.has(required):
            return PolicyVerdict.allow()
        return PolicyVerdict.deny(f"{check.operation.value} takes {required.value} "
                                  "in this profile")


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> PermissionsPolicy:
    no_extra_config(PERMISSIONS, "access", config)
    return PermissionsPolicy(profile.access)
