"""Who a store call acts for: the principal bound by the host, never by the namespace.

A LangGraph graph is built once and run for many users, so the principal is found per
call, in three places (what is found there must agree):

1. a principal fixed on the store (or tool) by the host, ``store.bind(principal)``;
2. the run's context (``graph.invoke(..., context=Ctx(principal=alice))``): the
   ``principal`` attribute of the context object, or its ``"principal"`` key;
3. the run's config, ``config["configurable"]["principal"]``.

Each present one must be a :class:`governed_memory.Principal` instance: the host builds
it from its own authentication. A string or a mapping (what a client's JSON could put in
a config) is refused, not converted, and two different principals in one call are
refused rather than chosen between. With none, the call fails with
:class:`PrincipalNotBoundError` (a ``MemoryScopeError``): there is no anonymous or
default principal to fall back to.

``principal_from`` replaces steps 2 and 3 for hosts whose authentication lands
elsewhere (LangGraph Server's ``config["configurable"]["langgraph_auth_user"]``, say):
it receives the run's config and returns the ``Principal`` or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from governed_memory import MemoryScopeError, Principal, Provenance
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import get_runtime

__all__ = ["PrincipalNotBoundError", "PrincipalSource", "current_config", "run_origin"]

PrincipalFrom = Callable[[RunnableConfig], Principal | None]


class PrincipalNotBoundError(MemoryScopeError):
    """No principal is bound to this call (or what is bound is not a ``Principal``)."""


def current_config() -> RunnableConfig | None:
    """The config of the graph run (or runnable) this call is inside, if any."""
    try:
        return get_config()
    except RuntimeError:
        return None


def _text(value: object) -> str | None:
    text = None if value is None else str(value)
    return text if text and text.strip() and len(text.encode("utf-8")) <= 1024 else None


def run_origin(source_type: str | None = None) -> Provenance:
    """Where a write comes from: ``source_type``, and the run's thread (LangGraph's
    conversation, as the session) and run id when the call is inside one. Evidence in
    the record's provenance, never used to decide anything."""
    config = current_config() or {}
    configurable: Mapping[str, Any] = config.get("configurable") or {}
    return Provenance(source_type=source_type,
                      session_id=_text(configurable.get("thread_id")),
                      run_id=_text(config.get("run_id")))


def _from_context(key: str) -> object:
    try:
        runtime = get_runtime()
    except (RuntimeError, KeyError):
        return None
    context = getattr(runtime, "context", None)
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def _checked(found: object, where: str) -> Principal:
    if not isinstance(found, Principal):
        raise PrincipalNotBoundError(
            f"{where} holds a {type(found).__name__}, not a governed_memory.Principal: the "
            "host builds the principal from its own authentication")
    return found


@attrs.frozen(slots=True)
class PrincipalSource:
    """Finds the principal of one call (see the module docstring for the order)."""

    fixed: Principal | None = None
    key: str = "principal"
    principal_from: PrincipalFrom | None = None

    def __attrs_post_init__(self) -> None:
        if self.fixed is not None:
            _checked(self.fixed, "the principal bound to the store")

    def bind(self, principal: Principal) -> PrincipalSource:
        return attrs.evolve(self, fixed=_checked(principal, "bind's argument"))

    def resolve(self) -> Principal:
        """The call's principal, from the run (graph, node, tool) the call is inside."""
        config = current_config()
        found: list[Principal] = []
        if self.fixed is not None:
            found.append(self.fixed)
        if self.principal_from is not None:
            if config is not None:
                value = self.principal_from(config)
                if value is not None:
                    found.append(_checked(value, "principal_from's answer"))
        elif config is not None:
            in_context = _from_context(self.key)
            if in_context is not None:
                found.append(_checked(in_context, f"the run context's {self.key!r}"))
            configurable: Mapping[str, Any] = config.get("configurable") or {}
            in_config = configurable.get(self.key)
            if in_config is not None:
                found.append(_checked(in_config, f"config['configurable'][{self.key!r}]"))
        if not found:
            raise PrincipalNotBoundError(
                "no principal is bound to this store call: bind one with store.bind(...), "
                f"or pass it in the run's context or config['configurable'][{self.key!r}]")
        first = found[0]
        if any(other != first for other in found[1:]):
            raise MemoryScopeError("this call is bound to two different principals")
        return first
