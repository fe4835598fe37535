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

Everything that can be checked when the profile loads is
(:mod:`governed_memory_policies.cedar_compile`: the set parses, validates against the
schema and can apply, the schema describes every request this plugin sends, and every
policy evaluates without error on sample requests). Parsing happens once per policy
set, not per call. A policy that errors at evaluation is named by its ``@id`` in the
reason, as in every other reason (:mod:`governed_memory_policies.cedar_source`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec

from governed_memory_policies.cedar_compile import REVIEW_ANNOTATION, CompiledSet, compile_set
from governed_memory_policies.cedar_entities import ENTITY_EXAMPLE
from governed_memory_policies.cedar_requests import (
    ACTION_TYPE,
    NAMESPACE,
    PRINCIPAL_TYPE,
    REFERENCE_SCHEMA,
    RESOURCE_TYPE,
    reference_schema,
    render,
)
from governed_memory_policies.cedar_source import evaluation_error
from governed_memory_policies.names import CEDAR
from governed_memory_policies.policy_as_code import (
    AccessRequest,
    Source,
    access_requests,
    check_keys,
    context_attributes,
    missing_package,
    principal_attributes,
    read_json_document,
    read_source,
    shorten,
    strictest,
)

if TYPE_CHECKING:
    import cedarpy

__all__ = [
    "ACTION_TYPE",
    "CODE_REVISION",
    "CONFIG_KEYS",
    "ENTITY_EXAMPLE",
    "NAMESPACE",
    "PRINCIPAL_TYPE",
    "REFERENCE_SCHEMA",
    "RESOURCE_TYPE",
    "REVIEW_ANNOTATION",
    "CedarPolicy",
    "CompiledSet",
    "build",
    "compile_set",
    "evaluation_error",
    "reference_schema",
]

log = logging.getLogger(__name__)

CODE_REVISION: Final = "1"
CONFIG_KEYS: Final = ("policies", "policies_file", "schema", "schema_file", "entities",
                      "entities_file", "resource_package")
_CACHE_SIZE: Final = 1024


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
        return strictest(verdicts)

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
        entities, bodies = render(principal_attributes(principal), requests, self._context)
        # Not validated against the schema again (that doubles the cost): the profile
        # load proved requests of this shape, with every attribute and with none, fit.
        handle = self.compiled.base.with_added_json_str(entities)
        return _Prepared(handle, tuple(bodies))


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
