"""The plumbing under the store suites: a factory hook, a per-test directory, the cleanup
hook, and an event loop per test (as the provider suite has, and for the same reasons).

A store suite is a class a store's tests subclass, implementing ``make_store(clock)``
(a fresh, empty, started store) and, for a durable store, ``reopen_store(clock)``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Concatenate, Final, Generic, NoReturn, ParamSpec, TypeVar

import pytest
from governed_memory.clock import ManualClock

from governed_memory_conformance.base import PLUGIN, ReopenUnsupported

P = ParamSpec("P")
S = TypeVar("S")
B = TypeVar("B", bound="StoreConformanceBase[Any]")

STORE_MACHINERY: Final = ("_conformance_context", "run_on_store", "run_across_reopen",
                          "finish_store", "store_is_durable")
"""Methods every store-suite test runs through; a subclass may not replace them."""


class StoreConformanceBase(Generic[S]):
    """What every store suite shares; see the suites for their contracts."""

    store_name: ClassVar[str | None] = None
    """The registered store name this class proves (reports use the class name when unset)."""

    scenario_timeout: ClassVar[float] = 60.0
    """Seconds one test may take before it fails as hung."""

    _tmp_path: Path | None = None
    _directories: Iterator[int] = itertools.count(1)

    async def make_store(self, clock: ManualClock) -> S:
        """Return a fresh, empty, **started** store (the suite closes it); storage must be
        private to it: :meth:`fresh_directory` for files, a unique name on a server."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `async def make_store(self, clock)`")

    async def reopen_store(self, clock: ManualClock) -> S:
        """A new started store over the storage :meth:`make_store` built last in this test
        (already closed). Durable stores implement it; the default cannot."""
        raise ReopenUnsupported(
            f"{type(self).__name__} cannot reopen storage (it implements no reopen_store)")

    async def cleanup_store(self, store: S) -> None:
        """The cleanup hook: remove what ``store`` kept outside :meth:`fresh_directory`
        before the suite closes it for good. The default calls the store's own
        ``dispose_storage()`` when it has one."""
        dispose = getattr(store, "dispose_storage", None)
        if callable(dispose):
            await dispose()

    # -- pytest wiring ------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _conformance_context(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        if not request.config.pluginmanager.has_plugin(PLUGIN):
            pytest.fail(f"the conformance plugin is not loaded: add pytest_plugins = "
                        f"[{PLUGIN!r}] to your root conftest.py", pytrace=False)
        self._tmp_path = tmp_path
        self._directories = itertools.count(1)

    def fresh_directory(self) -> Path:
        assert self._tmp_path is not None, "fresh_directory is for use inside a test"
        path = self._tmp_path / f"store-{next(self._directories)}"
        path.mkdir()
        return path

    def describe(self) -> str:
        return f"store {self.store_name or type(self).__name__}"

    # -- running ------------------------------------------------------------------------

    async def finish_store(self, store: S) -> None:
        try:
            await self.cleanup_store(store)
        finally:
            await getattr(store, "close")()  # noqa: B009 - every store has close()

    def run_on_store(self, body: Callable[[S, ManualClock], Awaitable[None]]) -> None:
        clock = ManualClock()

        async def main() -> None:
            store = await self.make_store(clock)
            try:
                async with asyncio.timeout(self.scenario_timeout):
                    await body(store, clock)
            except TimeoutError:
                raise AssertionError(f"the test did not finish within "
                                     f"{self.scenario_timeout:g} s; a store call hangs") from None
            finally:
                await self.finish_store(store)

        with asyncio.Runner() as runner:
            runner.run(main())

    def store_is_durable(self) -> bool:
        """What a store built by :meth:`make_store` says of itself (``durable``)."""
        durable: list[bool] = []

        async def probe(store: S, clock: ManualClock) -> None:
            durable.append(getattr(store, "durable", False) is True)

        self.run_on_store(probe)
        return durable[0]

    def run_across_reopen(self, before: Callable[[S, ManualClock], Awaitable[None]],
                          after: Callable[[S, ManualClock], Awaitable[None]]) -> None:
        if type(self).reopen_store is StoreConformanceBase.reopen_store:
            self._skip_reopen(ReopenUnsupported(
                f"{type(self).__name__} cannot reopen storage (it implements no reopen_store)"))
        clock = ManualClock()

        async def main() -> None:
            first = await self.make_store(clock)
            try:
                await before(first, clock)
            finally:
                await getattr(first, "close")()  # noqa: B009
            try:
                second = await self.reopen_store(clock)
            except ReopenUnsupported as exc:
                self._skip_reopen(exc)
            try:
                await after(second, clock)
            finally:
                await self.finish_store(second)

        with asyncio.Runner() as runner:
            runner.run(main())

    def _skip_reopen(self, why: ReopenUnsupported) -> NoReturn:
        pytest.skip(f"{self.describe()} is durable, but durability across a reopen is not "
                    f"tested: {why}")


def store_scenario(
    test: Callable[Concatenate[B, Any, ManualClock, P], Awaitable[None]],
) -> Callable[Concatenate[B, P], None]:
    """Turn ``async def test_x(self, store, clock)`` into a synchronous pytest test over
    a fresh started store on its own event loop."""

    def run(self: B, /, *args: P.args, **kwargs: P.kwargs) -> None:
        async def body(store: Any, clock: ManualClock) -> None:
            await test(self, store, clock, *args, **kwargs)

        self.run_on_store(body)

    functools.update_wrapper(run, test)
    signature = inspect.signature(test)
    parameters = [p for name, p in signature.parameters.items()
                  if name not in ("store", "clock")]
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return run
