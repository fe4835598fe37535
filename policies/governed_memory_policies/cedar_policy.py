"""``cedar``: a Cedar policy set decides, in process, beside the built-in policies.

A compliance team reviews, tests and signs off Cedar policies with Cedar's own tools;
this plugin runs that very set (``cedarpy``, the Rust engine) on every operation. Each
operation is mapped once (:mod:`governed_memory_policies.policy_as_code`) to a request
per scope it touches: principal ``GovernedMemory::Principal``, action
``GovernedMemory::Action::"<operation>"`` (in the group ``read``, ``write``, ``index``
or ``maintenance``), resource ``GovernedMemory::Memory``, context the profile.

Cedar knows permit and forbid; the engine also knows *review*. A ``forbid`` annotated
``@review`` (optionally ``@review("why")``) holds a new memory for review instead of
refusing it, so Cedar takes part in deny-beats-review-beats-allow: a plain ``forbid``
that matches denies; otherwise a matching ``@review`` forbid asks for review if the
rest of the set permits the request; otherwise Cedar's own answer stands (no permit
matched: deny). A policy that errors denies (Cedar would skip it, which for a forbid
would fail open).

Everything that can be checked when the profile loads is: the policies parse and
validate against the schema (an error names the file, the line and the policy's
``@id``), every policy can apply (:mod:`governed_memory_policies.cedar_checks`: no
attribute a request never carries, no ``has`` of an undeclared attribute, no condition
the validator proves false), the schema describes every request this plugin sends, and
every policy evaluates without error on sample requests. Parsing happens once per
policy set, not per call. A policy that errors at evaluation is named by its ``@id`` in
the reason, as in every other reason.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final

import attrs
from governed_memory.canonical import canonical_json
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec

from governed_memory_policies.cedar_checks import Problem, find_problems
from governed_memory_policies.names import CEDAR
from governed_memory_policies.policy_as_code import (
    SAMPLE_PRINCIPALS,
    AccessRequest,
    PolicySourceError,
    Source,
    access_requests,
    check_keys,
    context_attributes,
    json_kind,
    missing_package,
    principal_attributes,
    read_json_document,
    read_source,
    sample_requests,
    set_hash,
    shorten,
)

if TYPE_CHECKING:
    import cedarpy

log = logging.getLogger(__name__)

NAMESPACE: Final = "GovernedMemory"
PRINCIPAL_TYPE: Final = f"{NAMESPACE}::Principal"
RESOURCE_TYPE: Final = f"{NAMESPACE}::Memory"
ACTION_TYPE: Final = f"{NAMESPACE}::Action"
REVIEW_ANNOTATION: Final = "review"
REFERENCE_SCHEMA: Final = "governed-memory.cedarschema"
"""The schema of the requests this plugin sends, shipped in this package; the default
when a profile names none."""
CODE_REVISION: Final = "1"
CONFIG_KEYS: Final = ("policies", "policies_file", "schema", "schema_file", "entities",
                      "entities_file", "resource_package")
_REQUEST_ERROR: Final = "failed to build request"
_CACHE_SIZE: Final = 1024
ENTITY_EXAMPLE: Final = ('[{"uid": {"type": "GovernedMemory::Team", "id": "support"}, '
                         '"attrs": {"agents": ["agent:support-bot"]}, "parents": []}]')
"""The shape of ``entities``, shown when a value does not have it."""


def reference_schema() -> str:
    return files("governed_memory_policies").joinpath(REFERENCE_SCHEMA).read_text("utf-8")


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


@attrs.frozen(slots=True, eq=False)
class _Prepared:
    entities: cedarpy.Entities
    requests: tuple[dict[str, Any], ...]


class CedarPolicy:
    name = CEDAR

    def __init__(self, compiled: CompiledSet, profile: MemoryProfileSpec) -> None:
        import cedarpy

        self.compiled = compiled
        self.set_hash = compiled.set_hash
        self.revision = f"{CODE_REVISION}:{compiled.set_hash}"
        self._context = json.dumps(context_attributes(profile), sort_keys=True)
        self._authorize = cedarpy.is_authorized_batch
        # A decision is a pure function of the principal and the requests (the set, its
        # entities and the context are fixed for this policy; Cedar reads no clock), so
        # a repeated one is remembered, bounded, rather than evaluated again.
        self._decisions = functools.lru_cache(maxsize=_CACHE_SIZE)(self._decide)

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        # On the loop: a hop to a thread costs about what a decision does
        # (bench/policy_cost.py), and would buy nothing on a GIL-bound call this short.
        try:
            return self.decide(check.principal, access_requests(check))
        except Exception as exc:  # fail closed, with a reason that says so
            log.warning("Cedar policy set %s failed: %r", self.set_hash, exc)
            return PolicyVerdict.deny(shorten(f"Cedar evaluation failed: {exc}"))

    def decide(self, principal: Principal, requests: Sequence[AccessRequest]) -> PolicyVerdict:
        return self._decisions(principal, tuple(requests))

    def _decide(self, principal: Principal, requests: tuple[AccessRequest, ...]
                ) -> PolicyVerdict:
        compiled = self.compiled
        prepared = self._prepare(principal, requests)
        results = self._authorize(list(prepared.requests), compiled.policies,
                                  prepared.entities)
        verdicts: list[PolicyVerdict] = []
        held: list[int] = []
        for index, (request, result) in enumerate(zip(requests, results, strict=True)):
            verdict = self._verdict(request, result)
            if verdict is None:
                held.append(index)
            else:
                verdicts.append(verdict)
        if held:
            assert compiled.without_review is not None
            again = self._authorize([prepared.requests[i] for i in held],
                                    compiled.without_review, prepared.entities)
            for index, result in zip(held, again, strict=True):
                verdicts.append(self._review_verdict(requests[index], results[index], result))
        return _combine(verdicts)

    def _verdict(self, request: AccessRequest, result: cedarpy.AuthzResult
                 ) -> PolicyVerdict | None:
        """The verdict for one request, or ``None`` when only ``@review`` forbids
        matched (whether the rest permits decides)."""
        diagnostics = result.diagnostics
        if diagnostics.errors:
            return self._failed(diagnostics.errors[0])
        determining = list(diagnostics.reasons)
        if result.allowed:
            return PolicyVerdict.allow(f"permitted by {self._ids(determining)}")
        if not determining:
            return PolicyVerdict.deny(f"no Cedar policy permits {request.action}")
        refusing = [p for p in determining if p not in self.compiled.review]
        if refusing:
            return PolicyVerdict.deny(f"forbidden by {self._ids(refusing)}")
        return None

    def _review_verdict(self, request: AccessRequest, held: cedarpy.AuthzResult,
                        rest: cedarpy.AuthzResult) -> PolicyVerdict:
        if rest.diagnostics.errors:
            return self._failed(rest.diagnostics.errors[0])
        if not rest.allowed:
            return PolicyVerdict.deny(f"no Cedar policy permits {request.action}")
        notes = []
        for policy in held.diagnostics.reasons:
            note = self.compiled.review.get(policy, "")
            notes.append(self.compiled.names.get(policy, policy) + (f" ({note})" if note
                                                                    else ""))
        return PolicyVerdict.review(shorten("held for review by " + ", ".join(notes)))

    def _failed(self, error: str) -> PolicyVerdict:
        """A denial naming the policy that erred by its ``@id`` (Cedar says
        ``policy3``, which no reviewer knows)."""
        return PolicyVerdict.deny(shorten("Cedar evaluation failed: "
                                          + evaluation_error(error, self.compiled.names)))

    def _ids(self, policies: Sequence[str]) -> str:
        return ", ".join(self.compiled.names.get(p, p) for p in policies)

    def _prepare(self, principal: Principal, requests: tuple[AccessRequest, ...]
                 ) -> _Prepared:
        """The request's entities (parsed by Cedar) and request bodies."""
        entities, bodies = _render(principal_attributes(principal), requests,
                                   self._context)
        # Not validated against the schema again (that doubles the cost): the profile
        # load proved requests of this shape, with every attribute and with none, fit.
        handle = self.compiled.base.with_added_json_str(entities)
        return _Prepared(handle, tuple(bodies))


def _render(principal: Mapping[str, Any], requests: Sequence[AccessRequest],
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


def _combine(verdicts: Sequence[PolicyVerdict]) -> PolicyVerdict:
    """The strictest verdict over the scopes, with every distinct reason for it."""
    effect = max(v.effect for v in verdicts)
    reasons = list(dict.fromkeys(v.reason for v in verdicts if v.effect is effect))
    return PolicyVerdict(effect, shorten("; ".join(reasons)))


# -- loading -------------------------------------------------------------------------------

_COMPILED: dict[str, CompiledSet] = {}
_COMPILED_LOCK = threading.Lock()
_COMPILED_MAX: Final = 32


def build(config: Mapping[str, Any], profile: MemoryProfileSpec) -> CedarPolicy:
    check_keys(CEDAR, config, CONFIG_KEYS)
    try:
        import cedarpy  # noqa: F401
    except ImportError:
        raise missing_package(CEDAR, "cedarpy", "cedar") from None
    policies = read_source(config, "policies", required=True)
    assert policies is not None
    schema = read_source(config, "schema", required=False) or Source(
        f"governed_memory_policies/{REFERENCE_SCHEMA}", reference_schema())
    entities = read_json_document(config, "entities", expect=list,
                                  shape=f"an array of entities, e.g. {ENTITY_EXAMPLE}")
    return CedarPolicy(compile_set(policies, schema, entities), profile)


def compile_set(policies: Source, schema: Source,
                entities: tuple[Source, Any] | None = None) -> CompiledSet:
    """Parse, validate and check a policy set, or raise :class:`PolicySourceError`."""
    documents = {"policies": policies.text, "schema": schema.text,
                 "entities": entities[1] if entities else []}
    digest = set_hash(CEDAR, documents)
    with _COMPILED_LOCK:
        cached = _COMPILED.get(digest)
    if cached is not None:
        return cached
    compiled = _compile(policies, schema, entities, digest)
    with _COMPILED_LOCK:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[digest] = compiled
    return compiled


def _compile(policies: Source, schema: Source, entities: tuple[Source, Any] | None,
             digest: str) -> CompiledSet:
    import cedarpy

    spans = _statements(policies.text)
    starts = [line for _, _, line in spans]
    try:
        parsed = cedarpy.PolicySet.from_str(policies.text)
    except ValueError as exc:
        raise _parse_error(policies, exc) from None
    if len(parsed) == 0 and not parsed.templates():
        raise PolicySourceError("holds no policy (Cedar would deny every operation)",
                                source=policies.name)
    for template in parsed.templates():
        raise PolicySourceError("is a template (a ?principal or ?resource slot): write a "
                                "static policy", source=policies.name,
                                line=_line(starts, template["id"]),
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
                                    line=_line(starts, policy_id), policy=shown)
        names[policy_id] = shown
        if REVIEW_ANNOTATION in annotations:
            if body.get("effect") != "forbid":
                raise PolicySourceError(
                    "@review marks a forbid policy (held for review instead of refused); "
                    "on a permit it would mean nothing", source=policies.name,
                    line=_line(starts, policy_id), policy=shown)
            review[policy_id] = str(annotations[REVIEW_ANNOTATION] or "")
    result = cedarpy.validate_policies(policies.text, schema_handle)
    if not result.validation_passed:
        raise _validation_error(policies, schema, starts, names, result.errors)
    without_review = None
    if review:
        rest = {k: v for k, v in static.items() if k not in review}
        without_review = cedarpy.PolicySet.from_json_str(json.dumps(
            {"staticPolicies": rest, "templates": {}, "templateLinks": []}))
    base = _base_entities(entities, schema_handle)
    compiled = CompiledSet(parsed, without_review, schema_handle, base, names, review,
                           digest)
    _check_requests(compiled, policies, schema, starts)
    # After the schema is known to describe the requests: a schema that lacks an
    # attribute a request carries is named as such, not as a policy that cannot apply.
    try:
        problems = find_problems(static, schema_handle,
                                 {"principal": PRINCIPAL_TYPE, "resource": RESOURCE_TYPE})
    except ValueError as exc:  # Cedar refused a probe: refuse the set rather than guess
        raise PolicySourceError(f"could not be checked: {_first_line(exc)}",
                                source=policies.name) from None
    if problems:
        raise _never_applies(policies, spans, names, problems)
    return compiled


def _schema(schema: Source) -> cedarpy.Schema:
    import cedarpy

    try:
        if schema.text.lstrip().startswith("{"):
            return cedarpy.Schema.from_json_str(schema.text)
        return cedarpy.Schema.from_str(schema.text)
    except ValueError as exc:
        raise PolicySourceError(f"the schema does not parse: {_first_line(exc)}",
                                source=schema.name) from None


def _base_entities(entities: tuple[Source, Any] | None, schema: cedarpy.Schema
                   ) -> cedarpy.Entities:
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
        problem = _misfit(value, schema) or _first_line(exc)
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


def _check_requests(compiled: CompiledSet, policies: Source, schema: Source,
                    starts: Sequence[int]) -> None:
    """Every operation's request, with every optional attribute and with none, must fit
    the schema and evaluate without error: else the first real operation would deny."""
    import cedarpy

    context = json.dumps({"profile_id": "sample", "profile_version": "1.0.0",
                          "profile_revision": "sha256:sample"})
    refused: list[str] = []
    for principal, index in zip(SAMPLE_PRINCIPALS, (0, 1), strict=True):
        requests = [sample_requests(op)[index] for op in Operation]
        text, bodies = _render(principal, requests, context)
        try:
            handle = compiled.base.with_added_json_str(text, compiled.schema)
        except ValueError as exc:
            problem = _entity_problem(compiled) or _first_line(exc)
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
                policy = _erring_policy(error, compiled.names)
                raise PolicySourceError(
                    f"fails on a sample {request.action} request: "
                    f"{_first_line(_named(error, compiled.names))}",
                    source=policies.name,
                    line=_line(starts, policy) if policy else None,
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


def _erring_policy(error: str, names: Mapping[str, str]) -> str | None:
    for policy_id in names:
        if f"`{policy_id}`" in error or f" {policy_id}:" in error:
            return policy_id
    return None


def _named(text: str, names: Mapping[str, str]) -> str:
    """Cedar's message with each positional id (`` `policy3` ``) as the policy's @id."""
    for policy_id, shown in names.items():
        if shown != policy_id:
            text = text.replace(f"`{policy_id}`", f"`{shown}`")
    return text


def evaluation_error(error: str, names: Mapping[str, str]) -> str:
    """``policy <@id>: <what failed>`` from Cedar's ``error while evaluating policy
    `policy3`: <what failed>``; Cedar's text, with @ids, when it names no policy."""
    policy = _erring_policy(error, names)
    if policy is None:
        return _named(error, names)
    _, marker, rest = error.partition(f"`{policy}`: ")
    detail = rest if marker else _named(error, names)
    return f"policy {names[policy]}: {detail}"


def _never_applies(policies: Source, spans: Sequence[tuple[int, int, int]],
                   names: Mapping[str, str], problems: Sequence[Problem]
                   ) -> PolicySourceError:
    """One error for every policy that can never apply (or never take a branch it was
    written for), placed at the first."""
    placed = []
    for problem in problems:
        index = int(problem.policy_id.removeprefix("policy"))
        begin, end, line = spans[index]
        if problem.word is not None:
            line = _word_line(policies.text, begin, end, line, problem.word)
        placed.append((line, names.get(problem.policy_id, problem.policy_id), problem))
    line, shown, first = placed[0]
    more = "".join(f"; policy {name} (line {at}): {p.detail}" for at, name, p in placed[1:])
    return PolicySourceError(first.detail + more, source=policies.name, line=line,
                             policy=shown)


def _word_line(text: str, begin: int, end: int, line: int, word: str) -> int:
    """The line of the first whole ``word`` in ``text[begin:end]`` outside a comment;
    ``line`` (the policy's first) when there is none."""
    for number, row in enumerate(text[begin:end].split("\n")):
        code = _code_part(row)
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", code):
            return line + number
    return line


def _code_part(row: str) -> str:
    """A line without its ``//`` comment (a ``//`` inside a string is kept)."""
    quoted = False
    index = 0
    while index < len(row):
        char = row[index]
        if char == "\\" and quoted:
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif not quoted and row.startswith("//", index):
            return row[:index]
        index += 1
    return row


def _parse_error(policies: Source, exc: ValueError) -> PolicySourceError:
    """Cedar's parse error names no line: parse policy by policy to find it."""
    import cedarpy

    for index, (begin, end, line) in enumerate(_statements(policies.text)):
        try:
            cedarpy.PolicySet.from_str(policies.text[begin:end])
        except ValueError as one:
            return PolicySourceError(f"does not parse: {_first_line(one)}",
                                     source=policies.name, line=line, policy=f"policy{index}")
    return PolicySourceError(f"does not parse: {_first_line(exc)}", source=policies.name)


def _validation_error(policies: Source, schema: Source, starts: Sequence[int],
                      names: Mapping[str, str], errors: Sequence[cedarpy.ValidationError]
                      ) -> PolicySourceError:
    lines = []
    for error in errors:
        line = _line(starts, error.policy_id)
        shown = names.get(error.policy_id, error.policy_id)
        message = _named(error.error, names)
        lines.append(f"{shown} (line {line}): {message}" if line else f"{shown}: {message}")
    first = errors[0]
    return PolicySourceError(
        f"does not validate against the schema {schema.name}: " + "; ".join(lines),
        source=policies.name, line=_line(starts, first.policy_id),
        policy=names.get(first.policy_id, first.policy_id) or None)


def _line(starts: Sequence[int], policy_id: str | None) -> int | None:
    """The line a positional Cedar id (``policy3``) starts on."""
    if not policy_id or not policy_id.startswith("policy"):
        return None
    try:
        return starts[int(policy_id.removeprefix("policy"))]
    except (ValueError, IndexError):
        return None


def _statements(text: str) -> list[tuple[int, int, int]]:
    """(start, end, first line) of each policy in Cedar text, in order: what Cedar's
    positional ids (``policy0``, …) count. A policy ends at a ``;`` outside a string;
    Cedar's only comments are ``//`` to the end of the line."""
    found: list[tuple[int, int, int]] = []
    index, size, line = 0, len(text), 1
    start: int | None = None
    start_line = 1
    while index < size:
        char = text[index]
        if char == "\n":
            line += 1
        elif char == "/" and text.startswith("//", index):
            end = text.find("\n", index)
            index = size if end < 0 else end
            continue
        elif not char.isspace():
            if start is None:
                start, start_line = index, line
            if char == '"':
                index += 1
                while index < size and text[index] != '"':
                    if text[index] == "\\":
                        index += 1
                    elif text[index] == "\n":
                        line += 1
                    index += 1
            elif char == ";":
                found.append((start, index + 1, start_line))
                start = None
        index += 1
    if start is not None:
        found.append((start, size, start_line))
    return found


def _first_line(error: object) -> str:
    return shorten(str(error).strip().splitlines()[0] if str(error).strip() else
                   type(error).__name__)

