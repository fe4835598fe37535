"""The override guard: a provider's test class may not drop or weaken a suite test.

A subclass that redefines a suite test (or sets it to ``None``) must mark the
redefinition ``pytest.mark.xfail(reason=...)`` with a non-empty reason, so every
deviation from the contract is visible in the report as an expected failure with its
explanation, never as a silent pass. A team's own test that merely shares a suite
test's name is an override too (the guard cannot tell intent from a name), so its
message says how to rename it: the suite never names a test after a provider, so a
``test_<provider>_...`` name never collides, now or when the suite grows.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, cast

import pytest

from governed_memory_conformance.suite import ProviderConformance


def suite_tests(suite: type = ProviderConformance) -> dict[str, Any]:
    """Every test a suite defines, by name."""
    return {name: getattr(suite, name) for name in dir(suite) if name.startswith("test")}


def suite_of(cls: type) -> type | None:
    """The suite ``cls`` subclasses (``None`` for a suite itself or anything else)."""
    from governed_memory_conformance.stores import SUITES

    for suite in (ProviderConformance, *SUITES):
        if issubclass(cls, suite) and cls is not suite:
            return suite
    return None


def xfail_reason(test: object) -> str | None:
    """The reason of an ``xfail`` mark carried by ``test``, if it has a non-empty one."""
    for mark in getattr(test, "pytestmark", ()):
        if getattr(mark, "name", None) == "xfail":
            reason = mark.kwargs.get("reason")
            if isinstance(reason, str) and reason.strip():
                return reason
    return None


MACHINERY = ("_conformance_context", "declared_capabilities", "require_capabilities",
             "run_on_provider", "start_provider", "run_across_reopen", "finish_provider",
             "hypothesis_settings")
"""Methods every suite test runs through. Replacing one (to skip what is declared, or to
shrink the examples to nothing) would weaken every test at once, so it is refused
outright; there is no expected failure to declare here."""


def violations(cls: type, suite: type = ProviderConformance) -> list[str]:
    """What ``cls`` did to ``suite``'s tests without an ``xfail(reason=...)``; empty if
    nothing."""
    from governed_memory_conformance.stores.base import STORE_MACHINERY

    machinery = MACHINERY if suite is ProviderConformance else STORE_MACHINERY
    problems = [f"{cls.__qualname__}.{name} replaces the suite's machinery"
                for name in machinery if _definer(cls, name) not in suite.__mro__]
    for name, original in suite_tests(suite).items():
        current = getattr(cls, name, None)
        if current is original:
            continue
        if current is None or not callable(current):
            problems.append(f"{cls.__qualname__}.{name} removes a suite test")
        elif xfail_reason(current) is None:
            problems.append(
                f"{cls.__qualname__}.{name} overrides a suite test without "
                "pytest.mark.xfail(reason=...) (if it is a test of your own that happens "
                f"to share the suite's name, rename it, e.g. {_own_name(cls, name)})"
            )
    return problems


def _own_name(cls: type, name: str) -> str:
    """A name for a provider's own test that cannot collide with a suite test: the
    suite's names never carry a provider's name (``TestAcmeProvider`` -> ``test_acme_``)."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__.removeprefix("Test")).lower()
    for suffix in ("_provider", "_conformance"):
        if snake.endswith(suffix) and len(snake) > len(suffix):
            snake = snake.removesuffix(suffix)
    return f"test_{snake or 'own'}_{name.removeprefix('test_')}"


def _definer(cls: type, name: str) -> type | None:
    """The class whose body defines ``name`` for ``cls`` (attribute lookup order)."""
    return next((klass for klass in cls.__mro__ if name in vars(klass)), None)


def expected_failure(test: Callable[..., Any], reason: str, *, strict: bool = True,
                     raises: type[BaseException] | tuple[type[BaseException], ...] | None = None,
                     ) -> Callable[..., Any]:
    """A copy of suite test ``test`` marked as an expected failure, for a subclass body::

        test_x = expected_failure(ProviderConformance.test_x, reason="BUG: ...")

    The suite's own function is never marked (pytest marks mutate the function they
    decorate), so other providers' classes keep the plain test. ``strict`` makes the
    run fail when the bug is fixed, so the marker cannot outlive it.
    """
    if not reason.strip():
        raise ValueError("expected_failure needs a reason saying why the test fails")

    @functools.wraps(test)
    def copy(*args: Any, **kwargs: Any) -> Any:
        return test(*args, **kwargs)

    copy.__signature__ = inspect.signature(test)  # type: ignore[attr-defined]
    copy.pytestmark = list(getattr(test, "pytestmark", ()))  # type: ignore[attr-defined]
    mark = pytest.mark.xfail(reason=reason, strict=strict, raises=raises)
    return cast(Callable[..., Any], mark(copy))

