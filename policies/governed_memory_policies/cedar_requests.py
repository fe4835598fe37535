"""The requests the ``cedar`` plugin sends, in Cedar's own terms.

An operation's engine-neutral :class:`~governed_memory_policies.policy_as_code.AccessRequest`
values become Cedar entities and request bodies here, and only here, so that the
requests a policy set is checked against when it loads are built exactly as the ones it
decides on: principal ``GovernedMemory::Principal``, action
``GovernedMemory::Action::"<operation>"``, resource ``GovernedMemory::Memory``, context
the profile. The schema shipped in this package describes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any, Final

from governed_memory_policies.policy_as_code import AccessRequest

NAMESPACE: Final = "GovernedMemory"
PRINCIPAL_TYPE: Final = f"{NAMESPACE}::Principal"
RESOURCE_TYPE: Final = f"{NAMESPACE}::Memory"
ACTION_TYPE: Final = f"{NAMESPACE}::Action"
REFERENCE_SCHEMA: Final = "governed-memory.cedarschema"
"""The schema of the requests this plugin sends, shipped in this package; the default
when a profile names none."""


def reference_schema() -> str:
    return files("governed_memory_policies").joinpath(REFERENCE_SCHEMA).read_text("utf-8")


def render(principal: Mapping[str, Any], requests: Sequence[AccessRequest],
           context: str) -> tuple[str, list[dict[str, Any]]]:
    """Cedar JSON for the principal and resource entities, and the request bodies."""
    principal_id = str(principal["principal_id"])
    entities: list[dict[str, Any]] = [{"uid": {"type": PRINCIPAL_TYPE, "id": principal_id},
                                       "attrs": dict(principal), "parents": []}]
    seen: set[str] = set()
    bodies = []
    for request in requests:
        if request.resource_id not in seen:
            seen.add(request.resource_id)
            entities.append({"uid": {"type": RESOURCE_TYPE, "id": request.resource_id},
                             "attrs": request.resource_dict(), "parents": []})
        bodies.append({"principal": {"type": PRINCIPAL_TYPE, "id": principal_id},
                       "action": {"type": ACTION_TYPE, "id": request.action},
                       "resource": {"type": RESOURCE_TYPE, "id": request.resource_id},
                       "context": context})
    return json.dumps(entities), bodies
