"""The conformance pytest plugin, loaded only on request.

Opt in from the root ``conftest.py`` with
``pytest_plugins = ["governed_memory_conformance.plugin"]`` (or ``-p`` on the command line).

It is deliberately not a ``pytest11`` entry point: installing governed-memory must not
change the pytest runs of every project in the environment. It adds the override
guard, the ``--conformance-thorough`` option and the ``slow`` marker the thorough
variants carry.
"""

from __future__ import annotations

import inspect

import pytest

from governed_memory_conformance.capabilities import CORE, capabilities_of
from governed_memory_conformance.guard import suite_of, suite_tests, violations
from governed_memory_conformance.suite import AREAS, ProviderConformance, area_of


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("governed-memory conformance")
    group.addoption(
        "--conformance-thorough", action="store_true", default=False,
        help="run the slow thorough variants of the conformance properties "
             "(10,000 examples each by default)",
    )


ASYNCIO_LOOP_SCOPE = "asyncio_default_fixture_loop_scope"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _settle_pytest_asyncio(config)
    config.addinivalue_line(
        "markers", "slow: long property runs (the conformance suite's thorough variants)")
    config.addinivalue_line(
        "markers", "conformance(capabilities, area, area_order): a conformance suite "
                   "test, the provider capabilities it requires and its area (added by the "
                   "plugin; reports group by them)")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Label every suite test with what it proves and its area, for reports such as the
    CLI's tables."""
    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", item.name)
    if cls is None or not issubclass(cls, ProviderConformance) or name not in suite_tests():
        return
    required = capabilities_of(getattr(item, "obj", None))
    area = area_of(name)
    order = [known for known, _ in AREAS]
    item.add_marker(pytest.mark.conformance(
        capabilities=required or (CORE,), area=area,
        area_order=order.index(area) if area in order else len(order)))


def pytest_report_header(config: pytest.Config) -> str:
    from governed_memory_conformance import __version__

    return f"governed-memory conformance suite {__version__}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Refuse to collect a module whose provider (or store) class drops or weakens a
    suite test."""
    if not inspect.isclass(obj):
        return
    suite = suite_of(obj)
    if suite is None:
        return
    problems = violations(obj, suite)
    if problems:
        raise collector.CollectError(
            "governed-memory conformance guard: "
            + "; ".join(problems)
            + ". A suite test may only be replaced by one marked "
            "pytest.mark.xfail(reason=...), e.g. "
            "test_x = expected_failure(ProviderConformance.test_x, reason='BUG: ...'); "
            "the suite's machinery not at all. Name tests of your own after your provider "
            "(test_<provider>_...): the suite never uses such names, so they cannot "
            "collide with a suite test, today's or a later one"
        )


def _settle_pytest_asyncio(config: pytest.Config) -> None:
    """Keep pytest-asyncio quiet in a project that installed it but never configured it.

    The suite does not use pytest-asyncio (every test runs its own event loop), yet with
    the plugin installed and ``asyncio_default_fixture_loop_scope`` unset, pytest-asyncio
    prints a deprecation warning on every run that loads this suite. When the project
    has not chosen, this sets the value pytest-asyncio already behaves as when unset
    ("fixture-scope", which it names as the way to keep today's behaviour), before
    pytest-asyncio reads it (this hook runs first); a project's own choice always wins,
    and a pytest-asyncio without that value is left alone.
    """
    if not config.pluginmanager.hasplugin("asyncio"):
        return
    try:
        import pytest_asyncio.plugin as asyncio_plugin
    except ImportError:
        return
    unchanged = getattr(asyncio_plugin, "_MATCH_FIXTURE_SCOPE", None)
    if not isinstance(unchanged, str):
        return
    try:
        chosen = config.getini(ASYNCIO_LOOP_SCOPE)
    except ValueError:  # not registered: nothing to settle
        return
    if not chosen:
        # getini cached the unset value; the cache is what pytest-asyncio reads next.
        config._inicache[ASYNCIO_LOOP_SCOPE] = unchanged
