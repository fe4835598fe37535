"""The provider author's documents keep their promises.

Every ``python`` example of docs/writing-a-provider.md and docs/conformance.md runs:
the plugin example becomes the plugin of a made-up ``acme_memory`` package (whose
provider is the example provider under another name), and each test-class example runs
as a provider's test module would, through the conformance plugin, without
pytest-asyncio. docs/provider-changelog.md's import table names where each name really
lives, and it covers every import of the example provider as it was before the renames
(``fixtures/example_provider_before_issue_15.py.txt``), so a provider written then
finds its way by the table alone.
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "writing-a-provider.md"
SUITE_PAGE = ROOT / "docs" / "conformance.md"
CHANGELOG = ROOT / "docs" / "provider-changelog.md"
BEFORE_RENAMES = Path(__file__).parent / "fixtures" / "example_provider_before_issue_15.py.txt"
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)

PLUGIN = ("-p", "governed_memory_conformance.plugin")
ISOLATED = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:randomly")
SELECTED = ("round_trips or test_acme_ or every_removal or cursor_survives_hard or "
            "matches_ids_exactly or look_alike or zero_and_empty")

ACME_PROVIDER = '''
from example_provider import ExampleProvider


class AcmeProvider(ExampleProvider):
    """The example provider under the name the guide makes up."""

    name = "acme"

    def __init__(self, dsn, clock):
        super().__init__(clock)
        self.dsn = dsn
'''

FILL_IN = '''

def _give_every_class_a_provider():
    """A class the page shows without ``make_provider`` (its ``...``) gets the plugin's."""
    from acme_memory.plugin import build_acme_provider
    from governed_memory_conformance import ProviderConformance

    async def make_provider(self, clock):
        provider = build_acme_provider({}, clock)
        await provider.start()
        return provider

    for value in list(globals().values()):
        if (isinstance(value, type) and issubclass(value, ProviderConformance)
                and value.make_provider is ProviderConformance.make_provider):
            value.make_provider = make_provider


_give_every_class_a_provider()
'''


def examples(path: Path) -> list[str]:
    return FENCE.findall(path.read_text(encoding="utf-8"))


def plugin_example() -> str:
    (plugin,) = [code for code in examples(GUIDE) if "register_memory_providers" in code]
    return plugin


def class_examples() -> list[tuple[str, str]]:
    found = []
    for path in (GUIDE, SUITE_PAGE):
        for index, code in enumerate(examples(path)):
            if "(ProviderConformance)" in code:
                found.append((f"{path.name}[{index}]", code))
    return found


CLASS_EXAMPLES = class_examples()


def test_the_pages_have_class_examples() -> None:
    assert len([name for name, _ in CLASS_EXAMPLES if name.startswith("writing")]) >= 4
    assert len([name for name, _ in CLASS_EXAMPLES if name.startswith("conformance")]) >= 3


def test_the_conftest_example_loads_the_plugin() -> None:
    (conftest,) = [code for code in examples(GUIDE) if "pytest_plugins" in code]
    namespace: dict[str, object] = {}
    exec(compile(conftest, "conftest example", "exec"), namespace)
    assert namespace["pytest_plugins"] == ["governed_memory_conformance.plugin"]
    assert conftest in examples(SUITE_PAGE)


@pytest.mark.parametrize(("name", "code"), CLASS_EXAMPLES, ids=[n for n, _ in CLASS_EXAMPLES])
def test_a_class_example_runs_through_the_conformance_plugin(
        pytester: pytest.Pytester, name: str, code: str) -> None:
    pytester.makepyfile(**{"acme_memory/__init__": "", "acme_memory/provider": ACME_PROVIDER,
                           "acme_memory/plugin": plugin_example(),
                           "test_example": code + FILL_IN})
    pytester.syspathinsert()
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", SELECTED)
    assert not reprec.getfailedcollections(), f"{name} does not collect"
    known = set(re.findall(r"(test_\w+) = expected_failure\(", code))
    outcomes: dict[str, str] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        test = report.nodeid.split("::")[-1].split("[")[0]
        if report.failed:
            outcomes[test] = "xpass-strict" if "XPASS(strict)" in str(report.longrepr) \
                else "failed"
        elif report.when == "call" and report.passed:
            outcomes.setdefault(test, "passed")
    assert outcomes, f"{name} ran nothing"
    # The provider under the examples has none of the bugs the examples mark, so a
    # strict expected failure fails the run, exactly as the pages say it does.
    assert {test: outcome for test, outcome in outcomes.items() if test in known} == dict.fromkeys(
        known & set(outcomes), "xpass-strict")
    failed = {test for test, outcome in outcomes.items() if outcome == "failed"}
    assert not failed, f"{name}: {sorted(failed)} failed"


def test_the_plugin_example_registers_a_factory() -> None:
    namespace: dict[str, object] = {}
    source = plugin_example().replace("from acme_memory.provider import AcmeProvider\n", "")
    exec(compile(source, "plugin example", "exec"), namespace)
    registered: list[tuple[str, object, str]] = []

    def register(name: str, factory: object, description: str = "") -> None:
        registered.append((name, factory, description))

    namespace["register_memory_providers"](register)  # type: ignore[operator]
    assert [(name, description) for name, _, description in registered] == [
        ("acme", "Acme's memory store")]


# -- the changelog -----------------------------------------------------------------------


def import_table() -> dict[str, str]:
    """The changelog's "name | import it from" table: name -> module."""
    text = CHANGELOG.read_text(encoding="utf-8")
    table = text[text.index("| name | import it from |"):]
    table = table[: table.index("\n\n")]
    homes: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        names, module = (cell.strip() for cell in row.strip("| ").split(" | "))
        names = names.split("(were")[0]
        for found in re.findall(r"`([A-Za-z_]+)`", names):
            homes[found] = module.strip("`")
    return homes


def test_every_name_of_the_import_table_lives_where_it_says() -> None:
    homes = import_table()
    assert len(homes) > 40
    wrong = [f"{name} from {module}" for name, module in homes.items()
             if not hasattr(importlib.import_module(module), name)]
    assert not wrong, f"the changelog's import table is wrong for: {wrong}"


def test_the_changelog_lists_what_governed_memory_still_exports() -> None:
    import governed_memory

    text = CHANGELOG.read_text(encoding="utf-8")
    paragraph = text[text.index("Still exported by `governed_memory`:"):]
    paragraph = paragraph[: paragraph.index("\n- ")]
    listed = set(re.findall(r"`([A-Za-z_]+)`", paragraph)) - {"governed_memory"}
    assert listed == set(governed_memory.__all__)


def test_every_import_of_a_provider_from_before_the_renames_is_in_the_changelog() -> None:
    """The example provider as it was before issue 15 imported 30 names from
    ``governed_memory``; each is either still exported or in the changelog's table."""
    import governed_memory

    tree = ast.parse(BEFORE_RENAMES.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "governed_memory" for alias in node.names}
    assert len(imported) >= 30
    homes = import_table()
    unexplained = sorted(name for name in imported
                         if name not in governed_memory.__all__ and name not in homes)
    assert not unexplained, f"the changelog does not say where these went: {unexplained}"
    moved = sorted(name for name in imported if name not in governed_memory.__all__)
    assert moved, "the fixture no longer exercises the renames"


def test_usage_reporting_provider_is_a_deprecated_alias_of_usage_meter() -> None:
    from governed_memory import provider
    from governed_memory.usage import UsageMeter

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = provider.UsageReportingProvider
    assert alias is UsageMeter
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "usage_meter" in str(caught[0].message)
    assert "UsageReportingProvider" in CHANGELOG.read_text(encoding="utf-8")
    with pytest.raises(AttributeError):
        provider.NoSuchName  # noqa: B018 - the module's __getattr__ refuses others


def test_a_provider_without_the_accessors_is_told_what_is_missing(
        pytester: pytest.Pytester) -> None:
    """A provider from before the accessors fails the suite's first check with the names
    it lacks and the way to add them."""
    pytester.makepyfile(test_old='''
        from example_provider import ExampleProvider
        from governed_memory_conformance import ProviderConformance

        OPERATIONS = ("capabilities", "start", "close", "health", "add", "get", "list",
                      "search", "update", "delete", "history", "delete_all", "delete_user",
                      "purge_expired")


        class Old:
            """Every operation, and none of the optional-feature accessors."""

            name = "old"

            def __init__(self, clock):
                self._inner = ExampleProvider(clock)


        for _name in OPERATIONS:
            setattr(Old, _name, (lambda n: lambda self, *a, **k: getattr(self._inner, n)(
                *a, **k))(_name))


        class TestOld(ProviderConformance):
            async def make_provider(self, clock):
                return Old(clock)
    ''')
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED, "-k", "round_trips")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*make_provider returned Old, which does not implement governed_memory.MemoryProvider "
        "(missing: *usage_meter*); *mix in governed_memory.provider_kit.NoOptionalFeatures*"])
