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
from governed_memory_conformance.guard import suite_tests, violations
from governed_memory_conformance.suite import ProviderConformance


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("governed-memory conformance")
    group.addoption(
        "--conformance-thorough", action="store_true", default=False,
        help="run the slow thorough variants of the conformance properties "
             "(10,000 examples each by default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: long property runs (the conformance suite's thorough variants)")
    config.addinivalue_line(
        "markers", "conformance(capabilities): a conformance suite test and the provider "
                   "capabilities it requires (added by the plugin; reports group by it)")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Label every suite test with what it proves, for reports such as the CLI's table."""
    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", item.name)
    if cls is None or not issubclass(cls, ProviderConformance) or name not in suite_tests():
        return
    required = capabilities_of(getattr(item, "obj", None))
    item.add_marker(pytest.mark.conformance(capabilities=required or (CORE,)))


def pytest_report_header(config: pytest.Config) -> str:
    from governed_memory_conformance import __version__

    return f"governed-memory conformance suite {__version__}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Refuse to collect a module whose provider class drops or weakens a suite test."""
    if not (inspect.isclass(obj) and issubclass(obj, ProviderConformance)
            and obj is not ProviderConformance):
        return
    problems = violations(obj)
    if problems:
        raise collector.CollectError(
            "governed-memory conformance guard: "
            + "; ".join(problems)
            + ". A suite test may only be replaced by one marked "
            "pytest.mark.xfail(reason=...), e.g. "
            "test_x = expected_failure(ProviderConformance.test_x, reason='BUG: ...'); "
            "the suite's machinery not at all"
        )
