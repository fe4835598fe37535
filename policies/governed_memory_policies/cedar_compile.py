"""A Cedar policy set made ready once, when the profile loads, or refused there.

Everything that can be checked before the first operation is: the policies parse and
validate against the schema (an error names the file, the line and the policy's
``@id``), ``@id`` values are unique and ``@review`` marks only forbids, every policy can
apply (:mod:`governed_memory_policies.cedar_checks`), the schema describes every request
the plugin sends, and every policy evaluates without error on sample requests. A set
that passes is parsed once and shared by every policy built from the same documents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
from governed_memory.operations import Operation

from governed_memory_policies.cedar_checks import find_problems
from governed_memory_policies.cedar_entities import base_entities
from governed_memory_policies.cedar_requests import (
    PRINCIPAL_TYPE,
    REFERENCE_SCHEMA,
    RESOURCE_TYPE,
    render,
)
from governed_memory_policies.cedar_source import (
    erring_policy,
    line_of,
    named,
    never_applies,
    parse_error,
    statements,
    validation_error,
)
from governed_memory_policies.names import CEDAR
from governed_memory_policies.policy_as_code import (
    SAMPLE_CONTEXT,
    SAMPLE_PRINCIPALS,
    CompiledSets,
    PolicySourceError,
    Source,
    first_line,
    sample_requests,
    set_hash,
)

if TYPE_CHECKING:
    import cedarpy

REVIEW_ANNOTATION: Final = "review"
_REQUEST_ERROR: Final = "failed to build request"


@attrs.frozen(slots=True, eq=False)
class CompiledSet:
    """A policy set parsed, validated and checked once; shared by every policy built
    from the same documents (a profile is built once to be checked and again for each
    manager)."""

    policies: cedarpy.PolicySet
    without_review: cedarpy.PolicySet | None
    """The set minus its ``@review`` forbids: asked whether a held request would
    otherwise be permitted. ``None`` when the set has no ``@review`` policy."""
    schema: cedarpy.Schema
    base: cedarpy.Entities
    """The static entities (and the schema's action hierarchy)."""
    names: Mapping[str, str]
    """Cedar's policy id (``policy3``) → the id reasons show (its ``@id``, else itself)."""
    review: Mapping[str, str]
    """The ``@review`` forbids: Cedar's policy id → the note in its annotation."""
    set_hash: str


_COMPILED: CompiledSets[CompiledSet] = CompiledSets()


def compile_set(policies: Source, schema: Source,
                entities: tuple[Source, Any] | None = None) -> CompiledSet:
    """Parse, validate and check a policy set, or raise :class:`PolicySourceError`."""
    documents = {"policies": policies.text, "schema": schema.text,
                 "entities": entities[1] if entities else []}
    digest = set_hash(CEDAR, documents)
    return _COMPILED.get(digest, lambda: _compile(policies, schema, entities, digest))


def _compile(policies: Source, schema: Source, entities: tuple[Source, Any] | None,
             digest: str) -> CompiledSet:
    import cedarpy

    spans = statements(policies.text)
    starts = [line for _, _, line in spans]
    try:
        parsed = cedarpy.PolicySet.from_str(policies.text)
    except ValueError as exc:
        raise parse_error(policies, exc) from None
    if len(parsed) == 0 and not parsed.templates():
        raise PolicySourceError("holds no policy (Cedar would deny every operation)",
                                source=policies.name)
    for template in parsed.templates():
        raise PolicySourceError("is a template (a ?principal or ?resource slot): write a "
                                "static policy", source=policies.name,
                                line=line_of(starts, template["id"]),
                                policy=template["id_annotation"] or template["id"])
    schema_handle = _schema(schema)
    est = json.loads(cedarpy.policies_to_json_str(policies.text))
    static: dict[str, Any] = est.get("staticPolicies", {})
    names: dict[str, str] = {}
    review: dict[str, str] = {}
    for policy_id, body in static.items():
        annotations = body.get("annotations") or {}
        shown = annotations.get("id") or policy_id
        if shown in names.values():
            raise PolicySourceError(f"@id {shown!r} is used twice (reasons would not say "
                                    "which policy decided)", source=policies.name,
                                    line=line_of(starts, policy_id), policy=shown)
        names[policy_id] = shown
        if REVIEW_ANNOTATION in annotations:
            if body.get("effect") != "forbid":
                raise PolicySourceError(
                    "@review marks a forbid policy (held for review instead of refused); "
                    "on a permit it would mean nothing", source=policies.name,
                    line=line_of(starts, policy_id), policy=shown)
            review[policy_id] = str(annotations[REVIEW_ANNOTATION] or "")
    result = cedarpy.validate_policies(policies.text, schema_handle)
    if not result.validation_passed:
        raise validation_error(policies, schema, starts, names, result.errors)
    without_review = None
    if review:
        rest = {k: v for k, v in static.items() if k not in review}
        without_review = cedarpy.PolicySet.from_json_str(json.dumps(
            {"staticPolicies": rest, "templates": {}, "templateLinks": []}))
    base = base_entities(entities, schema_handle)
    compiled = CompiledSet(parsed, without_review, schema_handle, base, names, review,
                           digest)
    _check_requests(compiled, policies, schema, starts)
    # After the schema is known to describe the requests: a schema that lacks an
    # attribute a request carries is named as such, not as a policy that cannot apply.
    try:
        problems = find_problems(static, schema_handle,
                                 {"principal": PRINCIPAL_TYPE, "resource": RESOURCE_TYPE})
    except ValueError as exc:  # Cedar refused a probe: refuse the set rather than guess
        raise PolicySourceError(f"could not be checked: {first_line(exc)}",
                                source=policies.name) from None
    if problems:
        raise never_applies(policies, spans, names, problems)
    return compiled


def _schema(schema: Source) -> cedarpy.Schema:
    import cedarpy

    try:
        if schema.text.lstrip().startswith("{"):
            return cedarpy.Schema.from_json_str(schema.text)
        return cedarpy.Schema.from_str(schema.text)
    except ValueError as exc:
        raise PolicySourceError(f"the schema does not parse: {first_line(exc)}",
                                source=schema.name) from None


def _check_requests(compiled: CompiledSet, policies: Source, schema: Source,
                    starts: Sequence[int]) -> None:
    """Every operation's request, with every optional attribute and with none, must fit
    the schema and evaluate without error: else the first real operation would deny."""
    import cedarpy

    context = json.dumps(SAMPLE_CONTEXT)
    refused: list[str] = []
    for principal, index in zip(SAMPLE_PRINCIPALS, (0, 1), strict=True):
        requests = [sample_requests(op)[index] for op in Operation]
        text, bodies = render(principal, requests, context)
        try:
            handle = compiled.base.with_added_json_str(text, compiled.schema)
        except ValueError as exc:
            problem = _entity_problem(compiled) or first_line(exc)
            raise PolicySourceError(f"the schema does not describe the requests this "
                                    f"policy sends: {problem} (start from "
                                    f"governed_memory_policies/{REFERENCE_SCHEMA})",
                                    source=schema.name) from None
        results = cedarpy.is_authorized_batch(bodies, compiled.policies, handle,
                                              compiled.schema)
        for request, result in zip(requests, results, strict=True):
            for error in result.diagnostics.errors:
                if error.startswith(_REQUEST_ERROR):
                    if request.action not in refused:
                        refused.append(request.action)
                    continue
                policy = erring_policy(error, compiled.names)
                raise PolicySourceError(
                    f"fails on a sample {request.action} request: "
                    f"{first_line(named(error, compiled.names))}",
                    source=policies.name,
                    line=line_of(starts, policy) if policy else None,
                    policy=compiled.names.get(policy, policy) if policy else None)
    if refused:
        raise PolicySourceError(
            f"the schema does not describe the request of {', '.join(refused)} (every "
            f"operation is a request: declare its action with principal Principal, "
            f"resource Memory and the profile context, as "
            f"governed_memory_policies/{REFERENCE_SCHEMA} does)", source=schema.name)


def _entity_problem(compiled: CompiledSet) -> str | None:
    """Which attribute the schema disagrees on (Cedar's own error does not say), found by
    trying each entity alone: an attribute whose removal makes the full entity fit is
    undeclared or of another type; one whose removal makes it fail is required, though a
    request may leave it out."""

    def fits(kind: str, attributes: Mapping[str, Any]) -> bool:
        entity = {"uid": {"type": kind, "id": "probe"}, "attrs": dict(attributes),
                  "parents": []}
        try:
            compiled.base.with_added_json_str(json.dumps([entity]), compiled.schema)
        except ValueError:
            return False
        return True

    full, bare = (r.resource_dict() for r in sample_requests(Operation.ADD))
    for kind, whole, least in ((PRINCIPAL_TYPE, *SAMPLE_PRINCIPALS), (RESOURCE_TYPE, full, bare)):
        def without(name: str, whole: Mapping[str, Any] = whole) -> dict[str, Any]:
            return {k: v for k, v in whole.items() if k != name}

        if not fits(kind, whole):
            wrong = [name for name in whole if fits(kind, without(name))]
            return (f"{kind} has no attribute {', '.join(wrong)} of the type sent" if wrong
                    else f"{kind} does not fit (an attribute of another type?)")
        if not fits(kind, least):
            required = [name for name in whole
                        if name not in least and not fits(kind, without(name))]
            return (f"{kind} requires {', '.join(required) or 'an attribute'}, which a "
                    "request may leave out (declare it optional: name?: Type)")
    return None
