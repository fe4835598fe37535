"""Capability gating: the suite tests exactly what a provider claims.

A test names the ``Capabilities`` flags it needs with :func:`requires`. When the
provider does not declare one, the test is skipped and the skip names the flag; when it
does, the test runs and must pass. There is no third state, so a provider cannot claim
a capability and have its test quietly skipped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
from governed_memory.capabilities import Capabilities

F = TypeVar("F", bound=Callable[..., Any])

ATTRIBUTE: Final = "__conformance_capabilities__"
"""Where a test function keeps the capabilities it requires (read by reports and the CLI)."""

CORE: Final = "core"
"""The report row of tests every provider must pass, whatever it declares."""

CAPABILITY_NAMES: Final = tuple(
    field.name for field in attrs.fields(Capabilities) if field.type in (bool, "bool")
)
"""Every boolean flag of ``Capabilities``, in declaration order."""


def capabilities_of(test: object) -> tuple[str, ...]:
    """The capabilities a (possibly bound) test function requires; empty for core tests."""
    value = getattr(test, ATTRIBUTE, ())
    return tuple(value) if isinstance(value, tuple) else ()


def missing_capabilities(declared: Capabilities, needed: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in needed if getattr(declared, name) is not True)


def requires(*names: str) -> Callable[[F], F]:
    """Run the decorated test only if the provider declares every named capability.

    Works on any test method of a ``ProviderConformance`` subclass, including a
    provider's own extra tests. A misspelt name fails at import, not by skipping.
    """
    unknown = [name for name in names if name not in CAPABILITY_NAMES]
    if not names or unknown:
        raise ValueError(
            f"requires() needs capability names from {', '.join(CAPABILITY_NAMES)}; "
            f"got {', '.join(unknown) or 'none'}"
        )

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def gated(self: Any, *args: Any, **kwargs: Any) -> Any:
            self.require_capabilities(*names)
            return test(self, *args, **kwargs)

        # pytest reads the signature to find parameters; keep the test's own.
        gated.__signature__ = inspect.signature(test)  # type: ignore[attr-defined]
        setattr(gated, ATTRIBUTE, (*capabilities_of(test), *names))
        return gated  # type: ignore[return-value]

    return decorate
