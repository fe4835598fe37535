"""The static entities a Cedar profile gives (teams, groups), checked when it loads.

A policy set may refer to entities the operations do not carry
(``GovernedMemory::Team::"support".agents.contains(principal.principal_id)``); a profile
lists them in ``entities``. Cedar's
own error for a malformed or misfitting entity says only that deserialization failed,
so each entity's shape is checked first, and a misfit is found by trying each entity
alone, then without its parents and without each attribute: the error names the entity
and the attribute. Principals and resources are never given: they are built from each
operation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from governed_memory.canonical import canonical_json

from governed_memory_policies.cedar_requests import PRINCIPAL_TYPE, RESOURCE_TYPE
from governed_memory_policies.policy_as_code import (
    PolicySourceError,
    Source,
    first_line,
    json_kind,
)

if TYPE_CHECKING:
    import cedarpy

ENTITY_EXAMPLE: Final = ('[{"uid": {"type": "GovernedMemory::Team", "id": "support"}, '
                         '"attrs": {"agents": ["agent:support-bot"]}, "parents": []}]')
"""The shape of ``entities``, shown when a value does not have it."""


def base_entities(entities: tuple[Source, Any] | None, schema: cedarpy.Schema
                  ) -> cedarpy.Entities:
    """The profile's entities (none when it gives none), parsed against ``schema``."""
    import cedarpy

    source, value = entities if entities else (Source("<no entities>", "[]"), [])
    for index, entity in enumerate(value):
        problem = _entity_shape(entity)
        if problem is not None:
            raise PolicySourceError(f"entity {index} {problem}; an entity is an object like "
                                    f"{ENTITY_EXAMPLE[1:-1]}", source=source.name)
        kind = _uid(entity["uid"])["type"]
        if kind in (PRINCIPAL_TYPE, RESOURCE_TYPE):
            raise PolicySourceError(f"entity {index} is a {kind}: those are built from each "
                                    "operation, never given", source=source.name)
    try:
        return cedarpy.Entities.from_json_str(canonical_json(value), schema)
    except ValueError as exc:
        problem = _misfit(value, schema) or first_line(exc)
        raise PolicySourceError(f"the entities do not fit the schema: {problem}",
                                source=source.name) from None


def _misfit(entities: Sequence[Mapping[str, Any]], schema: cedarpy.Schema) -> str | None:
    """Which entity, and which attribute of it, the schema refuses (Cedar's own error
    says neither), found by trying each entity alone and then without each attribute."""
    import cedarpy

    def fits(entity: Mapping[str, Any]) -> bool:
        try:
            cedarpy.Entities.from_json_str(canonical_json([entity]), schema)
        except ValueError:
            return False
        return True

    for index, entity in enumerate(entities):
        if fits(entity):
            continue
        uid = _uid(entity["uid"])
        kind = uid["type"]
        named = f"entity {index} ({kind}::{json.dumps(uid['id'])})"
        bare = {**entity, "parents": []}
        if fits(bare):
            return f"{named}: a parent is of a type the schema does not let {kind} be in"
        attributes = dict(entity["attrs"])
        wrong = [name for name in attributes if fits(
            {**bare, "attrs": {k: v for k, v in attributes.items() if k != name}})]
        if wrong:
            return (f"{named}: attribute {', '.join(wrong)} is not declared for {kind}, or "
                    "has another type")
        return (f"{named}: the schema declares no entity type {kind}, or one of its "
                "required attributes is left out or of another type")
    return None


def _entity_shape(entity: Any) -> str | None:
    """What is wrong with one entity's shape (Cedar says only "error during entity
    deserialization"), or ``None``."""
    if not isinstance(entity, Mapping):
        return f"is a JSON {json_kind(entity)}, not an object"
    missing = [key for key in ("uid", "attrs", "parents") if key not in entity]
    if missing:
        return f"has no {', '.join(missing)}"
    uid = _uid(entity["uid"])
    if not (isinstance(uid, Mapping) and isinstance(uid.get("type"), str)
            and isinstance(uid.get("id"), str)):
        return 'has a uid that is not {"type": "<Namespace::Type>", "id": "<id>"}'
    if not isinstance(entity["attrs"], Mapping):
        return f"has attrs that are a JSON {json_kind(entity['attrs'])}, not an object"
    parents = entity["parents"]
    if not isinstance(parents, list):
        return f"has parents that are a JSON {json_kind(parents)}, not an array of uids"
    for parent in parents:
        uid = _uid(parent)
        if not (isinstance(uid, Mapping) and isinstance(uid.get("type"), str)
                and isinstance(uid.get("id"), str)):
            return ('has a parent that is not a uid {"type": "<Namespace::Type>", '
                    '"id": "<id>"}')
    return None


def _uid(uid: Any) -> Any:
    """An entity's uid, written ``{"type", "id"}`` or ``{"__entity": {"type", "id"}}``."""
    if isinstance(uid, Mapping) and set(uid) == {"__entity"}:
        return uid["__entity"]
    return uid
