"""``write-review``: memories from listed sources wait for a reviewer.

A new memory whose ``provenance.source_type`` is in ``write.review_source_types`` (say
``web`` or ``tool``: text an agent picked up, which may carry injected instructions)
is stored as ``pending_review``: invisible to every read until someone with
``memory:review`` approves it (it becomes active) or rejects it (it is erased).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.requests import AddRequest

from governed_memory_policies.base import config_revision, no_extra_config
from governed_memory_policies.names import WRITE_REVIEW


class WriteReviewPolicy:
    name = WRITE_REVIEW

    def __init__(self, source_types: tuple[str, ...]) -> None:
        self.source_types = frozenset(source_types)
        self.revision = config_revision(self.name, "1", sorted(self.source_types))

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        request = check.request
        if isinstance(request, AddRequest):
            source = request.provenance.source_type
            if source is not None and source in self.source_types:
                return PolicyVerdict.review(f"memories from source type {source} are "
                                            "reviewed before they are visible")
        return PolicyVerdict.allow()


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> WriteReviewPolicy:
    no_extra_config(WRITE_REVIEW, "write", config)
    return WriteReviewPolicy(profile.write.review_source_types)
