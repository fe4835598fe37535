"""Load-time proofs that every Cedar policy can apply to the requests this plugin sends.

Cedar's validator refuses ``resource.sensitivty`` (no such attribute) but accepts
``resource has sensitivty``: it types the test as always false, and a ``forbid`` whose
condition is always false never denies. That is a policy that fails open, and Cedar
would only warn about it (its "impossible policy" warning, which ``cedarpy`` does not
return). So a policy set is also refused when, read in its JSON form:

- it names an attribute of ``principal``, ``resource`` or ``context`` (by ``.``, ``[]``
  or ``has``, anywhere in a condition) that a request never carries: those attributes
  are fixed by :mod:`governed_memory_policies.policy_as_code`, whatever the schema
  declares;
- ``principal in …`` or ``resource in …`` names an entity of another type: a request's
  principal and resource have no parents (membership is not sent), so that never holds;
- a ``has`` test elsewhere (an entity from ``entities``, a record attribute) names an
  attribute the schema does not declare there;
- the validator can prove that its conditions are never all true.

The last two ask Cedar's own validator, with probes: a copy of the policy in which an
expression is put where the validator must type-check it only if the policy could
apply. ``"x" && true`` is ill-typed, so a probe fails validation exactly when that place
is checked. A probe replacing ``e has a`` with ``if e has a then <ill-typed> else
e has a`` passes only when the validator typed the test as always false, which it does
for an attribute the schema does not declare; a probe adding ``when { <ill-typed> }``
passes only when the conditions before it are always false. Every probe of a set is
validated in one call.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from governed_memory_policies.policy_as_code import (
    CONTEXT_ATTRIBUTES,
    PRINCIPAL_ATTRIBUTES,
    RESOURCE_ATTRIBUTES,
)

if TYPE_CHECKING:
    import cedarpy

SENT: Final[Mapping[str, tuple[str, ...]]] = {
    "principal": PRINCIPAL_ATTRIBUTES,
    "resource": RESOURCE_ATTRIBUTES,
    "context": CONTEXT_ATTRIBUTES,
}
"""The attributes a request's principal, resource and context can carry."""

_ILL_TYPED: Final[dict[str, Any]] = {"&&": {"left": {"Value": "governed-memory probe"},
                                            "right": {"Value": True}}}
_PROBE_ID: Final = "governed-memory-probe-"
_EXPRESSIONS: Final = ("left", "right", "arg", "if", "then", "else")
"""The keys of an operator's operands in Cedar's JSON form; others (``attr``,
``pattern``, ``entity_type``) are not expressions."""


@attrs.frozen(slots=True)
class Problem:
    """Why one policy can never apply (or never take a branch it was written for)."""

    policy_id: str
    """Cedar's positional id (``policy3``)."""
    detail: str
    word: str | None = None
    """A word of the policy text to find its line by (else the policy's first line)."""


def find_problems(static: Mapping[str, Any], schema: cedarpy.Schema,
                  own_types: Mapping[str, str]) -> list[Problem]:
    """Every problem of every policy, in policy order. ``static`` is the set's
    ``staticPolicies`` in Cedar's JSON form; ``own_types`` maps ``principal`` and
    ``resource`` to the entity type a request gives them."""
    problems: list[Problem] = []
    probes = _Probes()
    membership_tests = ("in", "is")
    for policy_id, policy in static.items():
        problems.extend(_scope_problems(policy_id, policy, own_types))
        for path, kind, payload in _nodes(policy):
            if kind in ("has", "."):
                found = _attribute_problem(policy_id, kind, payload)
                if found is not None:
                    problems.append(found)
                elif kind == "has" and _variable(payload["left"]) is None:
                    probes.undeclared(policy_id, policy, path, payload)
            elif kind in membership_tests and isinstance(payload, Mapping):
                right = payload.get("right" if kind == "in" else "in")
                problems.extend(_membership_problems(policy_id, payload.get("left"), right,
                                                     own_types))
        probes.impossible(policy_id, policy)
    undeclared, impossible = probes.run(schema)
    problems.extend(undeclared)
    # A policy that can never apply because of a problem named above needs no second
    # message saying so.
    explained = {p.policy_id for p in problems}
    problems.extend(p for p in impossible if p.policy_id not in explained)
    # One message per attribute of a policy: `resource has x && resource.x == …` is one
    # mistake.
    unique: dict[tuple[str, str], Problem] = {}
    for problem in problems:
        unique.setdefault((problem.policy_id, problem.word or problem.detail), problem)
    order = {policy_id: index for index, policy_id in enumerate(static)}
    return sorted(unique.values(), key=lambda p: order[p.policy_id])


# -- direct checks ---------------------------------------------------------------------------


def _variable(expression: Any) -> str | None:
    if isinstance(expression, Mapping) and set(expression) == {"Var"}:
        name = expression["Var"]
        return name if isinstance(name, str) else None
    return None


def _attribute_problem(policy_id: str, kind: str, payload: Mapping[str, Any]
                       ) -> Problem | None:
    variable = _variable(payload.get("left"))
    attribute = payload.get("attr")
    if variable is None or variable not in SENT or not isinstance(attribute, str):
        return None
    carried = SENT[variable]
    if attribute in carried:
        return None
    shown = f"{variable} has {attribute}" if kind == "has" else f"{variable}.{attribute}"
    effect = ("is always false" if kind == "has" else "can never be read")
    guess = difflib.get_close_matches(attribute, carried, n=1)
    hint = f" (did you mean {guess[0]}?)" if guess else ""
    return Problem(policy_id, f"`{shown}` {effect}: a request's {variable} has no attribute "
                              f"{attribute}{hint}; it carries {', '.join(carried)}",
                   attribute)


def _entities(value: Any) -> Iterator[Mapping[str, Any]]:
    """The entity literals of an ``in`` operand (one, or a set of them)."""
    if isinstance(value, Mapping):
        if set(value) == {"Value"}:
            yield from _entities(value["Value"])
        elif set(value) == {"Set"}:
            for item in value["Set"]:
                yield from _entities(item)
        elif set(value) == {"__entity"}:
            yield from _entities(value["__entity"])
        elif isinstance(value.get("type"), str) and isinstance(value.get("id"), str):
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _entities(item)


def _membership(policy_id: str, variable: str, entity: Mapping[str, Any],
                own_types: Mapping[str, str]) -> Problem | None:
    own = own_types[variable]
    if entity["type"] == own:
        return None
    group = f"{entity['type']}::{json.dumps(entity['id'])}"
    attribute = "principal_id" if variable == "principal" else "project_id"
    return Problem(policy_id,
                   f"`{variable} in {group}` never holds: a request's {variable} is a {own} "
                   f"without parents (membership is not sent); compare attributes instead, "
                   f"e.g. `{group}.members.contains({variable}.{attribute})`",
                   str(entity["id"]))


def _membership_problems(policy_id: str, left: Any, right: Any,
                         own_types: Mapping[str, str]) -> list[Problem]:
    variable = _variable(left)
    if variable is None or variable not in own_types:
        return []
    found = (_membership(policy_id, variable, e, own_types) for e in _entities(right))
    return [p for p in found if p is not None]


def _scope_problems(policy_id: str, policy: Mapping[str, Any],
                    own_types: Mapping[str, str]) -> list[Problem]:
    """``principal in X`` / ``principal is T in X`` in the scope (and for the resource)."""
    problems = []
    for variable in own_types:
        constraint = policy.get(variable)
        if not isinstance(constraint, Mapping):
            continue
        target = (constraint.get("in") if constraint.get("op") == "is"
                  else constraint if constraint.get("op") == "in" else None)
        if not isinstance(target, Mapping):
            continue
        for key in ("entity", "entities"):
            for entity in _entities(target.get(key)):
                found = _membership(policy_id, variable, entity, own_types)
                if found is not None:
                    problems.append(found)
    return problems


# -- walking a policy ------------------------------------------------------------------------

_Path = tuple[str | int, ...]


def _nodes(policy: Mapping[str, Any]) -> Iterator[tuple[_Path, str, Any]]:
    """Every operator node of every condition: its path from the policy, its operator,
    its payload."""
    for index, condition in enumerate(policy.get("conditions") or ()):
        yield from _walk(condition.get("body"), ("conditions", index, "body"))


def _walk(expression: Any, path: _Path) -> Iterator[tuple[_Path, str, Any]]:
    if not isinstance(expression, Mapping) or len(expression) != 1:
        return
    ((kind, payload),) = expression.items()
    if kind in ("Value", "Var", "Slot", "Unknown"):
        return
    yield path, kind, payload
    if kind == "Record" and isinstance(payload, Mapping):
        for name, item in payload.items():
            yield from _walk(item, (*path, kind, name))
    elif isinstance(payload, list):  # a set, or an extension function's arguments
        for position, item in enumerate(payload):
            yield from _walk(item, (*path, kind, position))
    elif isinstance(payload, Mapping):
        for key in _EXPRESSIONS:
            if key in payload:
                yield from _walk(payload[key], (*path, kind, key))
        if kind == "is" and "in" in payload:
            yield from _walk(payload["in"], (*path, kind, "in"))


def _replaced(policy: Mapping[str, Any], path: _Path, value: Any) -> dict[str, Any]:
    copied: dict[str, Any] = copy.deepcopy(dict(policy))
    parent: Any = copied
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return copied


# -- probes ----------------------------------------------------------------------------------


@attrs.define
class _Probe:
    policy_id: str
    problem: str
    word: str | None
    live: str | None
    """The probe that must fail for the place to count (``None``: the policy itself)."""


@attrs.define
class _Probes:
    policies: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    checks: list[tuple[str, _Probe]] = attrs.field(factory=list)
    """(the probe that must fail validation, what it means when it passes)."""

    def add(self, policy: Mapping[str, Any]) -> str:
        name = f"{_PROBE_ID}{len(self.policies)}"
        self.policies[name] = {**policy, "annotations": {"id": name}}
        return name

    def undeclared(self, policy_id: str, policy: Mapping[str, Any], path: _Path,
                   payload: Mapping[str, Any]) -> None:
        test = {"has": payload}
        live = self.add(_replaced(policy, path, _ILL_TYPED))
        declared = self.add(_replaced(policy, path, {"if-then-else": {
            "if": test, "then": _ILL_TYPED, "else": test}}))
        attribute = str(payload["attr"])
        self.checks.append((declared, _Probe(
            policy_id, f"`{_render(payload['left'])} has {attribute}` is always false: the "
                       f"schema declares no attribute {attribute} there", attribute, live)))

    def impossible(self, policy_id: str, policy: Mapping[str, Any]) -> None:
        conditions = [*(policy.get("conditions") or ()),
                      {"kind": "when", "body": _ILL_TYPED}]
        name = self.add({**policy, "conditions": conditions})
        self.checks.append((name, _Probe(
            policy_id, "can never apply: Cedar's validator proves its conditions are never "
                       "all true (a `has` of an undeclared attribute, a literal false, a "
                       "membership the schema does not allow)", None, None)))

    def run(self, schema: cedarpy.Schema) -> tuple[list[Problem], list[Problem]]:
        """(undeclared ``has`` tests, policies that can never apply)."""
        import cedarpy

        if not self.policies:
            return [], []
        text = cedarpy.policies_from_json_str(json.dumps(
            {"staticPolicies": self.policies, "templates": {}, "templateLinks": []}))
        result = cedarpy.validate_policies(text, schema)
        names = result.id_annotations_by_policy_id
        failed = {names.get(error.policy_id, error.policy_id) for error in result.errors}
        undeclared: list[Problem] = []
        impossible: list[Problem] = []
        for probe, meaning in self.checks:
            if probe in failed or (meaning.live is not None and meaning.live not in failed):
                continue  # checked and refused as expected; or a place never checked
            found = Problem(meaning.policy_id, meaning.problem, meaning.word)
            (impossible if meaning.live is None else undeclared).append(found)
        return undeclared, impossible


def _render(expression: Any) -> str:
    """A short Cedar rendering of the expressions a ``has`` is usually applied to."""
    variable = _variable(expression)
    if variable is not None:
        return variable
    if isinstance(expression, Mapping) and len(expression) == 1:
        ((kind, payload),) = expression.items()
        if kind == "." and isinstance(payload, Mapping):
            return f"{_render(payload.get('left'))}.{payload.get('attr')}"
        entities = list(_entities(expression)) if kind == "Value" else []
        if len(entities) == 1:
            return f"{entities[0]['type']}::{json.dumps(entities[0]['id'])}"
    return "…"
