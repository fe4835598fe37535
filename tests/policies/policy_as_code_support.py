"""Helpers for the Cedar and Rego tests: the engines' packages, the example policy sets
for compliance-strict, and principals the example rules are about."""

from __future__ import annotations

import importlib
import os
from importlib.resources import files
from typing import Any

import pytest
from actors import ALICE
from governed_memory.policy import Effect, MemoryPolicy
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles import MemoryProfileSpec, load_profile
from governed_memory.requests import AddRequest
from governed_memory.scope import Scope
from policy_support import check, profile

PACKAGE = "governed_memory_profiles"
EXAMPLES = "policies"


def require(module: str, extra: str) -> None:
    """Skip the module without the engine's package, or fail it when ``CI=true``: CI
    must never skip silently."""
    try:
        importlib.import_module(module)
    except ImportError:
        reason = f"{module} is not installed (pip install 'governed-memory[{extra}]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def example_text(name: str) -> str:
    return files(PACKAGE).joinpath(EXAMPLES, name).read_text(encoding="utf-8")


def example_profile(engine: str) -> MemoryProfileSpec:
    """``compliance-strict-cedar`` or ``compliance-strict-rego``, as shipped."""
    return load_profile(files(PACKAGE) / EXAMPLES / f"compliance-strict-{engine}.toml")


CEDAR_EXAMPLE: dict[str, Any] = {
    "resource_package": PACKAGE,
    "policies_file": f"{EXAMPLES}/compliance-strict.cedar",
    "schema_file": f"{EXAMPLES}/compliance-strict.cedarschema",
    "entities_file": f"{EXAMPLES}/compliance-strict.entities.json",
}
REGO_EXAMPLE: dict[str, Any] = {
    "resource_package": PACKAGE,
    "module_file": f"{EXAMPLES}/compliance-strict.rego",
    "data_file": f"{EXAMPLES}/compliance-strict.data.json",
}


def only(engine: str, config: dict[str, Any], **sections: Any) -> MemoryProfileSpec:
    """A profile whose only policy is ``engine`` with ``config``, in memory."""
    return profile(provider={"name": "native", "config": {"backend": "memory"}},
                   policies={"enabled": [engine], "extra": {engine: config}}, **sections)


RW = frozenset({Permission.READ, Permission.WRITE})
SUPPORT_BOT = Principal("agent:support-bot", PrincipalKind.AGENT, "acme", "alice", RW)
"""In the support team, whose project is ``helpdesk`` (the examples' data)."""
OTHER_BOT = Principal("agent:sales-bot", PrincipalKind.AGENT, "acme", "alice", RW)
ALICE_ADMIN = Principal("user:alice-admin", PrincipalKind.USER, "acme", "alice",
                        frozenset({Permission.READ, Permission.WRITE, Permission.ADMIN}))
HELPDESK = Scope("acme", project_id="helpdesk", user_id="alice")
BILLING = Scope("acme", project_id="billing", user_id="alice")


async def verdict(policy: MemoryPolicy, request: Any, principal: Principal = ALICE
                  ) -> tuple[Effect, str]:
    """The effect and reason ``policy`` gives ``request`` by ``principal``."""
    found = await policy.evaluate(check(request, principal))
    return found.effect, found.reason


def add(scope: Scope = HELPDESK, **fields: Any) -> AddRequest:
    return AddRequest(scope=scope, content="prefers tea", **fields)
