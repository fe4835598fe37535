"""The class a provider's tests subclass: the factory hook, capability checks and the
event loop every suite test runs on.

Suite tests are plain synchronous methods that drive async code on their own
``asyncio.Runner`` (one loop per test, one per hypothesis example). That keeps the
suite independent of pytest-asyncio and of whatever asyncio mode the consuming project
runs in.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Concatenate, Final, NoReturn, ParamSpec, TypeVar

import hypothesis
import pytest
from governed_memory.capabilities import Capabilities
from governed_memory.clock import Clock, ManualClock
from governed_memory.provider import MemoryProvider

from governed_memory_conformance.capabilities import ATTRIBUTE, missing_capabilities
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.settings import ConformanceSettings

P = ParamSpec("P")
S = TypeVar("S", bound="ConformanceBase")
T = TypeVar("T")

PLUGIN: Final = "governed_memory_conformance.plugin"
THOROUGH_ENV: Final = "GOVERNED_MEMORY_CONFORMANCE_THOROUGH"
THOROUGH_NOT_REQUESTED: Final = (
    "thorough run not requested (pytest -m slow or --conformance-thorough; "
    "governed-memory conformance --thorough)")


class ReopenUnsupported(NotImplementedError):
    """Raised by :meth:`ConformanceBase.reopen_provider` when the test class cannot
    open a provider over storage an earlier one wrote (the default)."""

_declared: dict[type, Capabilities] = {}
"""Capabilities per test class, probed once: a class builds its provider the same way
for every test, so asking again would only cost a start and a close."""


class ConformanceBase:
    """The plumbing under ``ProviderConformance``; see that class for the contract."""

    conformance_settings: ClassVar[ConformanceSettings] = ConformanceSettings()
    """Raise or lower the generated workload; see ``ConformanceSettings``."""

    provider_name: ClassVar[str | None] = None
    """The registered provider name this class proves (reports use ``provider.name``
    when unset)."""

    _pytest_config: pytest.Config | None = None
    _tmp_path: Path | None = None
    _directories: Iterator[int] = itertools.count(1)

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        """Return a fresh, empty, **started** provider that reads time from ``clock``.

        The suite calls this once per test (and once per hypothesis example) and closes
        the provider afterwards. Storage must be private to this provider: use
        :meth:`fresh_directory` for files and a unique name for anything shared.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async def make_provider(self, clock)` "
            "returning a fresh, empty, started provider"
        )

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        """Return a new **started** provider over the storage of the provider that
        :meth:`make_provider` built last in this test (which the suite has closed).

        Implement it to have durability proven: a provider that declares ``durable``
        must show that what it acknowledged survives closing and opening again. The
        usual way is to remember in ``make_provider`` where the storage is (a
        directory from :meth:`fresh_directory`, a namespace token) and build over the
        same place here. A class that cannot (its storage lives and dies with the
        instance) leaves it alone, and the durability tests skip saying exactly that.
        """
        raise ReopenUnsupported(
            f"{type(self).__name__} cannot reopen storage (it implements no reopen_provider)")

    async def cleanup_provider(self, provider: MemoryProvider) -> None:
        """The cleanup hook: called on each started provider the suite built, just before
        the suite closes it for good, to remove what the provider stored outside
        :meth:`fresh_directory` (a key prefix, a schema, a bucket).

        Files need nothing (pytest removes the directories). A server-backed provider
        either overrides this in its test class, or offers ``async def
        dispose_storage(self) -> None`` on the provider itself (remove everything this
        instance's configuration names), which the default calls; that is how
        ``governed-memory conformance --provider`` cleans up after plugins it knows
        nothing about. Not called between a provider and its reopening.
        """
        dispose = getattr(provider, "dispose_storage", None)
        if callable(dispose):
            await dispose()

    async def finish_provider(self, provider: MemoryProvider) -> None:
        """Clean up (``cleanup_provider``), then close, whatever the cleanup does."""
        try:
            await self.cleanup_provider(provider)
        finally:
            await provider.close()

    # -- pytest wiring ------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _conformance_context(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        """Bind the run's config and a per-test directory; refuse to run unguarded."""
        if not request.config.pluginmanager.has_plugin(PLUGIN):
            pytest.fail(
                f"the conformance plugin is not loaded: add pytest_plugins = [{PLUGIN!r}] to "
                f"your root conftest.py (or run pytest -p {PLUGIN}); it guards the suite "
                "against overridden tests",
                pytrace=False,
            )
        self._pytest_config = request.config
        self._tmp_path = tmp_path
        self._directories = itertools.count(1)

    def fresh_directory(self) -> Path:
        """A new empty directory, unique per call, removed with pytest's temp files."""
        if self._tmp_path is None:  # used outside pytest
            return Path(tempfile.mkdtemp(prefix="governed-memory-conformance-"))
        path = self._tmp_path / f"provider-{next(self._directories)}"
        path.mkdir()
        return path

    # -- capabilities -------------------------------------------------------------------

    def declared_capabilities(self) -> Capabilities:
        """What the provider built by :meth:`make_provider` declares."""
        cls = type(self)
        if cls not in _declared:
            async def probe(provider: MemoryProvider, clock: ManualClock) -> Capabilities:
                return provider.capabilities()

            _declared[cls] = self.run_on_provider(probe)
        return _declared[cls]

    def require_capabilities(self, *names: str) -> None:
        """Skip the running test, naming each capability the provider does not declare."""
        missing = missing_capabilities(self.declared_capabilities(), names)
        if missing:
            plural = "capabilities" if len(missing) > 1 else "capability"
            pytest.skip(f"{plural} {', '.join(missing)} not declared by {self.describe()}")

    def describe(self) -> str:
        return f"provider {self.provider_name or type(self).__name__}"

    # -- running ------------------------------------------------------------------------

    def run_on_provider(self, body: Callable[[MemoryProvider, ManualClock], Awaitable[T]]) -> T:
        """Run ``body`` on a new event loop against a fresh provider, then close both."""
        clock = ManualClock()
        timeout = self.conformance_settings.scenario_timeout

        async def main() -> T:
            provider = await self.start_provider(clock)
            try:
                async with asyncio.timeout(timeout):
                    return await body(provider, clock)
            except TimeoutError:
                raise AssertionError(
                    f"the test did not finish within {timeout:g} s; a provider call hangs"
                ) from None
            finally:
                await self.finish_provider(provider)

        with asyncio.Runner() as runner:
            return runner.run(main())

    async def start_provider(self, clock: ManualClock) -> MemoryProvider:
        provider = await self.make_provider(clock)
        if not isinstance(provider, MemoryProvider):
            missing = [name for name in _protocol_members() if not hasattr(provider, name)]
            raise AssertionError(
                f"make_provider returned {type(provider).__name__}, which does not implement "
                f"governed_memory.MemoryProvider (missing: {', '.join(missing) or '?'}); an "
                "optional-feature accessor it does not offer answers None: mix in "
                "governed_memory.provider_kit.NoOptionalFeatures (docs/provider-changelog.md)"
            )
        return provider

    def run_across_reopen(
        self,
        before: Callable[[Harness], Awaitable[T]],
        after: Callable[[Harness, T], Awaitable[None]],
    ) -> None:
        """Run ``before`` on a fresh provider, close it, reopen the same storage with
        :meth:`reopen_provider` and run ``after`` on the new one (with the same clock,
        so the time has not moved); skip if the class cannot reopen."""
        if type(self).reopen_provider is ConformanceBase.reopen_provider:
            self._skip_reopen(ReopenUnsupported(
                f"{type(self).__name__} cannot reopen storage (it implements no "
                "reopen_provider)"))
        clock = ManualClock()
        timeout = self.conformance_settings.scenario_timeout

        async def main() -> None:
            first = await self.start_provider(clock)
            try:
                async with asyncio.timeout(timeout):
                    seen = await before(Harness(first, clock))
            finally:
                await first.close()
            try:
                second = await self.reopen_provider(clock)
            except ReopenUnsupported as exc:
                self._skip_reopen(exc)
            try:
                async with asyncio.timeout(timeout):
                    await after(Harness(second, clock), seen)
            except TimeoutError:
                raise AssertionError(
                    f"the test did not finish within {timeout:g} s; a provider call hangs"
                ) from None
            finally:
                await self.finish_provider(second)

        with asyncio.Runner() as runner:
            runner.run(main())

    def _skip_reopen(self, why: ReopenUnsupported) -> NoReturn:
        pytest.skip(f"{self.describe()} declares durable, but durability across a reopen "
                    f"is not tested: {why}")

    # -- hypothesis ---------------------------------------------------------------------

    def thorough_requested(self) -> bool:
        """Whether the ``slow`` thorough variants should run rather than skip.

        They run with ``--conformance-thorough``, with ``GOVERNED_MEMORY_CONFORMANCE_THOROUGH=1``,
        or when the marker expression asks for ``slow`` tests (``pytest -m slow``).
        """
        if os.environ.get(THOROUGH_ENV, "").strip() not in ("", "0"):
            return True
        config = self._pytest_config
        if config is None:
            return False
        if config.getoption("conformance_thorough", default=False):
            return True
        expression = str(config.getoption("markexpr", default="") or "")
        return "slow" in expression and "not slow" not in expression

    def hypothesis_settings(self, max_examples: int, **overrides: Any) -> hypothesis.settings:
        """Settings for the suite's properties: no per-example deadline (datastores vary),
        no health check that punishes a slow provider, reproducible failures."""
        chosen = self.conformance_settings
        extra: dict[str, Any] = {} if chosen.use_hypothesis_database else {"database": None}
        if not chosen.shrink:
            extra["phases"] = (hypothesis.Phase.explicit, hypothesis.Phase.reuse,
                               hypothesis.Phase.generate)
        return hypothesis.settings(
            max_examples=max_examples,
            deadline=None,
            suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                   hypothesis.HealthCheck.filter_too_much,
                                   hypothesis.HealthCheck.data_too_large],
            print_blob=True,
            **extra,
            **overrides,
        )


def _protocol_members() -> list[str]:
    """What ``MemoryProvider`` asks of a provider: its attributes and methods."""
    return sorted({*MemoryProvider.__annotations__,
                   *(name for name in vars(MemoryProvider) if not name.startswith("_"))})


def scenario(
    test: Callable[Concatenate[S, Harness, P], Awaitable[None]],
) -> Callable[Concatenate[S, P], None]:
    """Turn ``async def test_x(self, h, ...)`` into a synchronous pytest test.

    The test gets a :class:`Harness` over a fresh started provider on its own event
    loop; the provider is closed afterwards whatever happens.
    """

    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> None:
        async def body(provider: MemoryProvider, clock: ManualClock) -> None:
            await test(self, Harness(provider, clock), *args, **kwargs)

        self.run_on_provider(body)

    functools.update_wrapper(run, test)  # name, docs, marks and source location

    signature = inspect.signature(test)
    parameters = [p for name, p in signature.parameters.items() if name != "h"]
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    if hasattr(test, ATTRIBUTE):
        setattr(run, ATTRIBUTE, getattr(test, ATTRIBUTE))
    return run
