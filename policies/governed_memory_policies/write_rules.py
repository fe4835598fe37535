"""``write-rules``: what a profile lets be written at all.

- a read-only profile refuses every ordinary write (add, update, delete, approve,
  reject); erasure and cleanup (``delete_all``, ``delete_user``, ``purge_expired``)
  still run, because a legal erasure obligation outranks a configuration choice;
- an allow-list of memory types refuses adds and updates to any other type;
- required scope dimensions: a new memory must name each of them (reads may still span
  broader levels);
- required idempotency keys: a write without one is refused, so every retry is safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from governed_memory.operations import MAINTENANCE, OperationKind
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec, ScopeSection, WriteSection
from governed_memory.records import MemoryType
from governed_memory.requests import AddRequest, UpdateRequest
from governed_memory.tiers.requests import AppendTurnRequest

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import WRITE_RULES


@attrs.frozen(slots=True)
class WriteRules:
    write: WriteSection
    scope: ScopeSection


class WriteRulesPolicy:
    name = WRITE_RULES

    def __init__(self, rules: WriteRules) -> None:
        self.rules = rules
        self.revision = config_revision(self.name, "1", rules)
        self._required = tuple(d for d in rules.scope.required if d != "tenant_id")

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        operation, request, write = check.operation, check.request, self.rules.write
        if operation.kind is not OperationKind.WRITE or operation in MAINTENANCE:
            return PolicyVerdict.allow()
        if write.read_only:
            return PolicyVerdict.deny("the profile is read-only")
        if write.require_idempotency_key and getattr(request, "idempotency_key", "") is None:
            return PolicyVerdict.deny(f"{operation.value} needs an idempotency_key "
                                      "in this profile")
        if (write.require_idempotency_key and isinstance(request, AppendTurnRequest)
                and request.turn.turn_id is None):
            # A turn's id is its idempotency key: a retried append stores it once.
            return PolicyVerdict.deny("append_turn needs a turn_id in this profile")
        if isinstance(request, AddRequest | UpdateRequest):
            refused = self._type_refused(request.memory_type)
            if refused is not None:
                return PolicyVerdict.deny(refused)
        if isinstance(request, AddRequest):
            missing = [d for d in self._required if getattr(request.scope, d) is None]
            if missing:
                return PolicyVerdict.deny("new memories need scope dimension(s) "
                                          + ", ".join(missing))
        return PolicyVerdict.allow()

    def _type_refused(self, memory_type: MemoryType | None) -> str | None:
        allowed = self.rules.write.allowed_memory_types
        if memory_type is None or not allowed or memory_type in allowed:
            return None
        return (f"memory type {memory_type.value} is not allowed; allowed: "
                + ", ".join(t.value for t in allowed))


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> WriteRulesPolicy:
    no_extra_config(WRITE_RULES, "write", config)
    return WriteRulesPolicy(WriteRules(profile.write, profile.scope))
