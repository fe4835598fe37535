"""Where a LangGraph namespace lives: the mapping from namespace tuples to exact scopes.

A LangGraph namespace (``("memories", "alice")``) is a path the graph chooses, often
filled from values a client sent. A scope is an ownership boundary the scope rule
enforces. So the mapping never takes the tenant from a namespace (it is always the
principal's), and a namespace label becomes a scope dimension only where a rule says so
(``"{user_id}"``), after which the scope rule checks it against the principal like any
other scope: a label cannot widen what the principal may reach.

A rule is a pattern of segments, matched against the namespace label by label:

- a literal label (``"memories"``) matches itself;
- ``"{dimension}"`` matches any label and makes it that scope dimension (``user_id``,
  ``project_id``, ``session_id``, ``run_id``, ``agent_id``, ``workspace_id`` or
  ``domain_pack``; never ``tenant_id``);
- ``"*"`` matches any one label, which stays in the namespace only;
- ``"..."`` (last segment only) matches any number of further labels, none included.

The first rule that matches places the namespace. The scope is the principal's tenant,
the rule's ``fixed`` dimensions, the captured labels and, unless a label gave one or
``per_user`` is off, the principal's ``user_id``. The default mapping is one rule,
``("...",)``: every namespace of a principal lives in that principal's user scope
(``Scope(tenant, user_id=...)``), the scope the per-turn context builder recalls a user's
memories from.

Several namespaces may share a scope; the item's namespace and key are kept with the
record (``governed_memory_langgraph.items``), so they never collide inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs
from governed_memory import MemoryType, MemoryValidationError, Principal, Scope
from governed_memory.limits import check_identifier
from governed_memory.scope import DIMENSIONS

__all__ = [
    "ANY",
    "DEFAULT_MAPPING",
    "REST",
    "NamespaceMapping",
    "NamespaceRule",
    "Placement",
]

ANY: Final = "*"
"""A segment matching any one label, kept in the namespace only."""
REST: Final = "..."
"""The last segment of a pattern: any number of further labels (LangGraph labels cannot
contain ``.``, so no real label is ever ``...``)."""

MAPPABLE: Final = tuple(name for name in DIMENSIONS if name != "tenant_id")
"""Dimensions a rule may fix or capture: every one but the tenant, which is the
principal's."""


def _capture(segment: str) -> str | None:
    """The dimension a ``"{dimension}"`` segment captures, else ``None``."""
    if len(segment) > 2 and segment[0] == "{" and segment[-1] == "}":
        return segment[1:-1]
    return None


def _pattern(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise MemoryValidationError("a namespace pattern is a tuple of segments, not a "
                                    "string", field="pattern")
    return tuple(value)


def _fixed(value: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((value or {}).items()))


@attrs.frozen(slots=True)
class NamespaceRule:
    """One pattern of namespaces and the scope they live in."""

    pattern: tuple[str, ...] = attrs.field(converter=_pattern)
    fixed: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_fixed)
    """Scope dimensions every namespace of the rule gets (``{"project_id": "kb"}``)."""
    per_user: bool = True
    """The scope takes the principal's ``user_id`` when no label captures one. Off, the
    namespace is shared by the tenant's users: readable by each, writable only with
    ``memory:admin`` (the scope rule's "writing a shared scope")."""
    memory_type: MemoryType = attrs.field(default=MemoryType.NOTE, converter=MemoryType)
    """The records' ``memory_type`` (``preference`` for a profile namespace, ...)."""
    source_type: str = "langgraph"
    """The records' ``provenance.source_type``: what a profile's ``[write]
    review_source_types`` holds for review (``"web"`` for a namespace of pages an agent
    read, say)."""

    def __attrs_post_init__(self) -> None:
        if not self.pattern:
            raise MemoryValidationError("a namespace pattern needs at least one segment",
                                        field="pattern")
        captured: set[str] = set()
        for index, segment in enumerate(self.pattern):
            if not isinstance(segment, str) or not segment:
                raise MemoryValidationError("pattern segments are non-empty strings",
                                            field="pattern")
            if segment == REST:
                if index != len(self.pattern) - 1:
                    raise MemoryValidationError(f"{REST!r} may only end a pattern",
                                                field="pattern")
                continue
            dimension = _capture(segment)
            if dimension is not None:
                if dimension not in MAPPABLE:
                    raise MemoryValidationError(
                        f"pattern segment {segment!r} names no scope dimension a "
                        f"namespace may set ({', '.join(MAPPABLE)})", field="pattern")
                if dimension in captured:
                    raise MemoryValidationError(f"{segment!r} appears twice in a pattern",
                                                field="pattern")
                captured.add(dimension)
            elif segment != ANY and "." in segment:
                raise MemoryValidationError("LangGraph namespace labels cannot contain '.'",
                                            field="pattern")
        for name, value in self.fixed:
            if name not in MAPPABLE:
                raise MemoryValidationError(
                    f"fixed dimension {name!r} is not one a rule may set "
                    f"({', '.join(MAPPABLE)})", field="fixed")
            if name in captured:
                raise MemoryValidationError(f"{name} is both fixed and captured",
                                            field="fixed")
            check_identifier(value, f"fixed.{name}")
        check_identifier(self.source_type, "source_type")

    @property
    def captures(self) -> tuple[str, ...]:
        """The dimensions this rule's labels set, in pattern order."""
        return tuple(d for segment in self.pattern if (d := _capture(segment)) is not None)

    def _fixed_length(self) -> int:
        return len(self.pattern) - (1 if self.pattern[-1] == REST else 0)

    def match(self, namespace: Sequence[str]) -> dict[str, str] | None:
        """The captured dimensions if ``namespace`` is one of this rule's, else ``None``."""
        length = self._fixed_length()
        if len(namespace) < length or (len(namespace) > length and self.pattern[-1] != REST):
            return None
        return self._compare(namespace[:length], wildcards=False)

    def known_from_prefix(self, prefix: Sequence[str], *,
                          wildcards: bool) -> dict[str, str] | None:
        """What a namespace prefix tells about this rule's scope: the dimensions its
        labels capture, or ``None`` when no namespace of the rule has the prefix.
        ``wildcards``: a ``"*"`` label of the prefix matches any label (a listing's
        condition) and tells nothing."""
        length = self._fixed_length()
        if len(prefix) > length and self.pattern[-1] != REST:
            return None
        return self._compare(prefix[:length], wildcards=wildcards)

    def _compare(self, labels: Sequence[str], *, wildcards: bool) -> dict[str, str] | None:
        captured: dict[str, str] = {}
        for segment, label in zip(self.pattern, labels, strict=False):
            dimension = _capture(segment)
            if wildcards and label == ANY:
                continue
            if dimension is not None:
                captured[dimension] = label
            elif segment != ANY and segment != label:
                return None
        return captured

    def scope(self, principal: Principal, captured: Mapping[str, str]) -> Scope:
        """The exact scope for ``principal`` with these captured labels."""
        dimensions: dict[str, str | None] = {**dict(self.fixed), **captured}
        if "user_id" not in dimensions and self.per_user:
            dimensions["user_id"] = principal.user_id
        return Scope.from_dimensions({**dimensions, "tenant_id": principal.tenant_id})


@attrs.frozen(slots=True)
class Placement:
    """Where one namespace lives for one principal."""

    rule: NamespaceRule
    scope: Scope


def _rules(value: Iterable[NamespaceRule | Sequence[str]]) -> tuple[NamespaceRule, ...]:
    rules = tuple(rule if isinstance(rule, NamespaceRule) else NamespaceRule(rule)
                  for rule in value)
    if not rules:
        raise MemoryValidationError("a namespace mapping needs at least one rule",
                                    field="rules")
    return rules


@attrs.frozen(slots=True)
class NamespaceMapping:
    """Ordered rules; the first that matches a namespace places it. A rule may be given
    as a bare pattern (``("memories", "{user_id}")``) for the defaults."""

    rules: tuple[NamespaceRule, ...] = attrs.field(default=((REST,),), converter=_rules)

    def place(self, principal: Principal, namespace: Sequence[str]) -> Placement:
        """The scope ``namespace`` lives in for ``principal``. A namespace no rule
        matches is refused (``MemoryValidationError``), never guessed."""
        for rule in self.rules:
            captured = rule.match(namespace)
            if captured is not None:
                return Placement(rule, rule.scope(principal, captured))
        raise MemoryValidationError("the namespace matches no rule of the store's "
                                    "namespace mapping", field="namespace")

    def reachable(self, principal: Principal, prefix: Sequence[str], *,
                  wildcards: bool = False) -> tuple[Scope, ...]:
        """The distinct scopes that may hold namespaces starting with ``prefix`` for
        ``principal``: what a search or a listing reads.

        A rule's scope is known when every dimension it captures is named by the prefix
        or, for ``user_id``, is the principal's own (the only user scope it may reach).
        A rule whose scope the prefix leaves open (``("docs", "{project_id}")`` under
        the prefix ``("docs",)``) is skipped: scopes are not enumerable through the
        manager, so its namespaces are reached only by a prefix that names the label.
        """
        found: dict[str, Scope] = {}
        for rule in self.rules:
            known = rule.known_from_prefix(prefix, wildcards=wildcards)
            if known is None:
                continue
            missing = [d for d in rule.captures if d not in known]
            if missing == ["user_id"] and principal.user_id is not None:
                known = {**known, "user_id": principal.user_id}
            elif missing:
                continue
            try:
                scope = rule.scope(principal, known)
            except MemoryValidationError:
                continue  # a prefix label that can be no scope value holds nothing
            found.setdefault(scope.scope_hash, scope)
        return tuple(found.values())


DEFAULT_MAPPING: Final = NamespaceMapping()
"""Every namespace in the principal's user scope."""
