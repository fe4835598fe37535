"""Meta-tests: the suite catches broken providers, guards its tests, gates on
capabilities, and stays out of pytest runs that did not ask for it.

Each test runs pytest in-process (``pytester``) on a generated provider test module,
without pytest-asyncio, the way a third party with a plain pytest would.
"""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest
from governed_memory_conformance import ProviderConformance
from governed_memory_conformance.guard import suite_tests

PLUGIN = ("-p", "governed_memory_conformance.plugin")
ISOLATED = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:randomly")

MODULE = '''
from {module} import {provider}
from governed_memory_conformance import (
    ConformanceSettings, ProviderConformance, expected_failure, requires)
import pytest


class TestProvider(ProviderConformance):
    # Fail fast: a broken provider's counterexample need not be minimal here.
    conformance_settings = ConformanceSettings(shrink=False, use_hypothesis_database=False,
                                               thorough_examples=3)

    async def make_provider(self, clock):
        provider = {provider}(clock)
        await provider.start()
        return provider
'''


def write_module(pytester: pytest.Pytester, provider: str, body: str = "",
                 module: str = "broken") -> None:
    source = MODULE.format(module=module, provider=provider) + textwrap.indent(
        textwrap.dedent(body), "    ")
    pytester.makepyfile(test_subject=source)


def outcomes(reprec: pytest.HookRecorder) -> dict[str, str]:
    """Outcome per test name (parameters dropped; any failing case fails the name)."""
    found: dict[str, str] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        name = report.nodeid.split("::")[-1].split("[")[0]
        if report.failed:
            found[name] = "failed"
        elif report.skipped and found.get(name) != "failed":
            found[name] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call" and name not in found:
            found[name] = "passed"
    return found


def skip_reasons(reprec: pytest.HookRecorder) -> dict[str, str]:
    reasons = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        if report.skipped and isinstance(report.longrepr, tuple):
            reasons[report.nodeid.split("::")[-1]] = str(report.longrepr[2]).removeprefix(
                "Skipped: ")
    return reasons


def test_the_example_provider_passes_the_whole_suite(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider")
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED)
    results = outcomes(reprec)
    assert set(results) == set(suite_tests())
    failed = sorted(name for name, outcome in results.items() if outcome == "failed")
    assert not failed
    # The example declares neither review, usage, dedup, scope revisions nor the
    # store-wide expiry purge, and it is not durable; everything else runs.
    reasons = skip_reasons(reprec)
    assert set(reasons) == {name for name, outcome in results.items() if outcome == "skipped"}
    assert {reason.split(" not declared")[0] for reason in reasons.values()} == {
        "capability review", "capability usage", "capability durable", "capability dedup",
        "capability scope_revisions", "capability purge_expired_all",
        "thorough run not requested (pytest -m slow or --conformance-thorough; "
        "governed-memory conformance --thorough)"}


BROKEN = {
    "ScopeLeakingProvider": {
        "test_no_read_or_write_crosses_scopes",
        "test_scope_isolation_property",
        "test_provider_agrees_with_the_reference_model",
        "test_search_finds_the_scopes_matching_records",
        "test_history_of_another_scopes_record_is_not_found",
    },
    "DeleteForgettingRevisionProvider": {
        "test_a_hard_delete_advances_its_scope",
        "test_delete_all_advances_its_scope",
        "test_a_purge_that_removes_records_advances_their_scope",
    },
    "EpochlessErasureProvider": {
        "test_delete_user_advances_the_tenant_epoch_and_never_goes_back",
    },
    "RevisionIgnoringProvider": {
        "test_stale_revision_conflicts_and_changes_nothing",
        "test_concurrent_compare_and_set_updates_lose_no_update",
        "test_provider_agrees_with_the_reference_model",
    },
    "ExpiredReturningProvider": {
        "test_expired_record_is_invisible_at_once",
        "test_search_never_returns_deleted_expired_or_pending_records",
        "test_provider_agrees_with_the_reference_model",
    },
    # The bugs a provider written from the docs passed the suite with (issue 14).
    "ReplayKeepingProvider": {
        "test_hard_delete_leaves_no_idempotent_replay_of_the_record",
        "test_delete_user_leaves_no_idempotent_replay_of_the_users_records",
    },
    "ExpiredHistoryProvider": {"test_history_of_an_expired_record_is_not_found"},
    "SupersessionDroppingProvider": {"test_supersession_is_kept_by_add_and_update"},
    "PurgeStoppingProvider": {
        "test_purge_expired_keeps_a_cursor_over_pages_that_purge_nothing"},
    "ExpiredSoftDeletingProvider": {"test_soft_delete_of_an_expired_record_is_refused"},
    "ReviewIgnoringIdempotencyProvider": {
        "test_review_decisions_replay_their_idempotency_keys"},
    # Review and pending visibility.
    "PendingLeakingProvider": {
        "test_pending_review_records_are_invisible_to_reads",
        "test_search_never_returns_deleted_expired_or_pending_records",
    },
    "ActiveApprovingProvider": {
        "test_review_needs_a_pending_record_of_the_scope",
        "test_a_decided_record_cannot_be_decided_again",
    },
    "PendingKeyFreeProvider": {"test_a_pending_record_holds_its_key_and_hides_from_every_read"},
    # The bugs a provider written from the guide passed the suite with (issue 28).
    "TombstoneKeyProvider": {
        "test_every_removal_frees_the_key",
        "test_a_key_added_again_is_a_new_record",
        "test_soft_delete_hides_the_record",
    },
    "ErasedKeyProvider": {
        "test_every_removal_frees_the_key",
        "test_hard_delete_removes_the_record_and_its_history",
    },
    "RevivingProvider": {
        "test_every_removal_frees_the_key",
        "test_a_key_added_again_is_a_new_record",
    },
    "EpochForgettingProvider": {
        "test_zero_and_empty_values_are_stored_as_given",
        "test_an_update_to_zero_or_empty_sets_it",
        "test_the_epoch_bounds_a_search_like_any_time",
    },
    "FalsyUpdateProvider": {"test_an_update_to_zero_or_empty_sets_it"},
    "FalsyWindowProvider": {"test_the_epoch_bounds_a_search_like_any_time"},
    "UnlockedAddProvider": {
        "test_concurrent_adds_with_one_key_store_exactly_one",
        "test_concurrent_idempotent_adds_write_once",
    },
    "UnlockedUpdateProvider": {"test_concurrent_idempotent_updates_write_one_version"},
    "UnlockedApproveProvider": {"test_concurrent_review_decisions_decide_once"},
    "OffsetCursorProvider": {
        "test_cursor_survives_hard_deletes_and_purges_between_pages",
        "test_cursor_survives_deleting_the_record_it_points_at",
    },
    "PointerCursorProvider": {"test_cursor_survives_hard_deletes_and_purges_between_pages"},
    "NullMatchesMissingProvider": {
        "test_metadata_filters_match_present_keys_and_numbers_by_value"},
    "StrictNumberProvider": {"test_metadata_filters_match_present_keys_and_numbers_by_value"},
    "NormalizingScopeProvider": {"test_look_alike_ids_are_different_scopes"},
    "SharedIdempotencyProvider": {"test_idempotency_keys_belong_to_one_operation"},
    "LiveReplayProvider": {
        "test_a_replay_returns_the_first_result_not_the_record_as_it_is_now"},
    "KeyBlindDedupProvider": {"test_dedup_matches_content_scope_and_key_exactly"},
    "ExpiredDedupProvider": {"test_dedup_never_returns_a_record_that_is_not_live"},
    "StaleHashDedupProvider": {"test_dedup_follows_an_update_of_the_content"},
    "DedupForgettingKeyProvider": {"test_a_deduplicated_add_records_its_idempotency_key"},
    "NewestDedupProvider": {"test_an_identical_add_returns_the_live_record"},
}


@pytest.mark.parametrize("provider", sorted(BROKEN))
def test_a_broken_provider_fails_the_suite(pytester: pytest.Pytester, provider: str) -> None:
    write_module(pytester, provider)
    # Only the tests that name the bug (and the model, when it is among them): the rest
    # of the suite passing is the healthy baseline's business, and costs seconds here.
    expected = BROKEN[provider]
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", " or ".join(sorted(expected)))
    assert reprec.ret == pytest.ExitCode.TESTS_FAILED
    failed = {name for name, outcome in outcomes(reprec).items() if outcome == "failed"}
    assert expected <= failed, f"not caught by: {sorted(expected - failed)}"


DURABLE_MODULE = """
    storage = {}

    async def make_provider(self, clock):
        self.storage = {}
        return await self.reopen_provider(clock)

    async def reopen_provider(self, clock):
        provider = %s(clock, self.storage) if %r else %s(clock)
        await provider.start()
        return provider
"""


@pytest.mark.parametrize(("provider", "outcome"), [("SharedStorageProvider", "passed"),
                                                   ("AmnesiacProvider", "failed")])
def test_durability_is_proven_across_a_reopen(pytester: pytest.Pytester, provider: str,
                                              outcome: str) -> None:
    shared = provider == "SharedStorageProvider"
    write_module(pytester, provider, body=DURABLE_MODULE % (provider, shared, provider))
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "survive_a_reopen")
    assert outcomes(reprec) == {"test_acknowledged_writes_survive_a_reopen": outcome}


def test_a_durable_provider_that_cannot_reopen_says_so(pytester: pytest.Pytester) -> None:
    write_module(pytester, "SharedStorageProvider")  # durable, no reopen_provider
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "survive_a_reopen")
    assert outcomes(reprec) == {"test_acknowledged_writes_survive_a_reopen": "skipped"}
    (reason,) = skip_reasons(reprec).values()
    assert reason == ("provider TestProvider declares durable, but durability across a "
                      "reopen is not tested: TestProvider cannot reopen storage (it "
                      "implements no reopen_provider)")


def test_overriding_a_suite_test_without_xfail_fails_the_run(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        def test_stale_revision_conflicts_and_changes_nothing(self):
            pass  # "our provider does not need this"
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*conformance guard: TestProvider.test_stale_revision_conflicts_and_changes_nothing "
        "overrides a suite test without pytest.mark.xfail(reason=...)*",
    ])


def test_an_own_test_named_like_a_suite_test_is_told_how_to_rename(
        pytester: pytest.Pytester) -> None:
    """A team's own test that happens to share a suite test's name aborts collection of
    its module; the message says how to fix it (rename it after the provider)."""
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        def test_list_filters_by_memory_type(self):
            assert True  # our own check, unaware the suite has a test of this name
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*TestProvider.test_list_filters_by_memory_type overrides a suite test without "
        "pytest.mark.xfail(reason=...) (if it is a test of your own that happens to share "
        "the suite's name, rename it, e.g. test_provider_list_filters_by_memory_type)*",
    ])
    result.stdout.fnmatch_lines(["*Name tests of your own after your provider*"])


def test_every_suite_test_belongs_to_an_area() -> None:
    """The CLI's area table and docs/conformance.md group tests by area; a new test
    class has to join an area."""
    from governed_memory_conformance.suite import AREAS, area_of

    assert not [name for name in suite_tests() if area_of(name) is None]
    guide = (Path(__file__).parents[2] / "docs" / "conformance.md").read_text(encoding="utf-8")
    missing = [area for area, _ in AREAS if f"| {area} |" not in guide]
    assert not missing, f"areas docs/conformance.md does not describe: {missing}"


def test_removing_a_suite_test_fails_the_run(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        test_scope_isolation_property = None
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*TestProvider.test_scope_isolation_property removes a suite test*"])


def test_replacing_the_suites_machinery_fails_the_run(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        def require_capabilities(self, *names):
            pytest.skip("nothing to see here")
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*TestProvider.require_capabilities replaces the suite's machinery*"])


def test_an_xfail_without_a_reason_is_refused(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        @pytest.mark.xfail
        def test_list_filters_by_memory_type(self):
            super().test_list_filters_by_memory_type()
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*test_list_filters_by_memory_type overrides a suite test*"])


def test_an_xfail_override_with_a_reason_is_accepted(pytester: pytest.Pytester) -> None:
    write_module(pytester, "RevisionIgnoringProvider", body="""
        test_stale_revision_conflicts_and_changes_nothing = expected_failure(
            ProviderConformance.test_stale_revision_conflicts_and_changes_nothing,
            reason="BUG: revisions are ignored")

        @pytest.mark.xfail(reason="BUG: revisions are ignored", strict=True)
        def test_concurrent_compare_and_set_updates_lose_no_update(self):
            super().test_concurrent_compare_and_set_updates_lose_no_update()
    """)
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "stale_revision or lose_no_update")
    assert reprec.ret == pytest.ExitCode.OK
    results = outcomes(reprec)
    assert results == {"test_stale_revision_conflicts_and_changes_nothing": "xfailed",
                       "test_concurrent_compare_and_set_updates_lose_no_update": "xfailed"}


def test_expected_failure_marks_only_the_copy(pytester: pytest.Pytester) -> None:
    """pytest marks mutate the function they decorate; the suite's own must stay clean."""
    write_module(pytester, "ExampleProvider", module="example_provider", body="""
        test_list_filters_by_memory_type = expected_failure(
            ProviderConformance.test_list_filters_by_memory_type, reason="documented")
    """)
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "test_list_filters_by_memory_type")
    assert outcomes(reprec) == {"test_list_filters_by_memory_type": "failed"}  # strict XPASS
    assert not hasattr(ProviderConformance.test_list_filters_by_memory_type, "pytestmark")


def test_undeclared_capabilities_are_skipped_by_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(partial_provider="""
        import attrs
        from example_provider import ExampleProvider

        class PartialProvider(ExampleProvider):
            def capabilities(self):
                return attrs.evolve(super().capabilities(), history=False, idempotency=False,
                                    lexical_search=False)
    """)
    write_module(pytester, "PartialProvider", module="partial_provider")
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "history or same_key or search")
    results = outcomes(reprec)
    reasons = skip_reasons(reprec)
    assert results["test_history_returns_detached_copies"] == "skipped"
    assert "capability history not declared" in reasons["test_history_returns_detached_copies"]
    assert "capability idempotency not declared" in reasons[
        "test_same_key_and_request_returns_the_first_record"]
    assert "capabilities idempotency, history not declared" not in reasons.values()
    assert "capability lexical_search not declared" in reasons[
        "test_search_respects_the_limit"]
    # Tests of declared capabilities still run (and pass) in the same class.
    assert results["test_hard_delete_removes_the_record_and_its_history"] == "passed"
    assert "failed" not in results.values()


def test_a_declared_capability_that_does_not_hold_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(boastful_provider="""
        from example_provider import ExampleProvider
        from governed_memory.errors import MemoryCapabilityUnsupportedError

        class BoastfulProvider(ExampleProvider):
            async def history(self, request, ctx):
                raise MemoryCapabilityUnsupportedError("no history here")
    """)
    write_module(pytester, "BoastfulProvider", module="boastful_provider")
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "test_history_")
    results = outcomes(reprec)
    assert results and set(results.values()) == {"failed"}


def test_thorough_variants_run_only_when_requested(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider")
    quiet = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "thorough")
    assert set(outcomes(quiet).values()) == {"skipped"}
    assert all("thorough run not requested" in reason
               for reason in skip_reasons(quiet).values())
    asked = pytester.inline_run(*PLUGIN, *ISOLATED, "-k", "thorough", "--conformance-thorough")
    assert set(outcomes(asked).values()) == {"passed"}
    assert len(outcomes(asked)) == 2


def test_the_suite_refuses_to_run_without_its_plugin(pytester: pytest.Pytester) -> None:
    write_module(pytester, "ExampleProvider", module="example_provider")
    result = pytester.runpytest_inprocess(*ISOLATED, "-k", "test_list_filters_by_memory_type")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*the conformance plugin is not loaded*pytest_plugins*"])


def test_the_plugin_is_opt_in() -> None:
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        assert "governed_memory_conformance" not in entry_point.value, (
            f"{entry_point.name} auto-loads the conformance plugin into every pytest run")


def test_the_plugin_is_absent_from_runs_that_do_not_ask(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="""
        def test_plain(request):
            assert not request.config.pluginmanager.has_plugin(
                "governed_memory_conformance.plugin")
    """)
    pytester.runpytest_inprocess(*ISOLATED).assert_outcomes(passed=1)


def test_helper_modules_are_assertion_rewritten() -> None:
    for name in ("governed_memory_conformance.harness", "governed_memory_conformance.base",
                 "governed_memory_conformance.suite.crud",
                 "governed_memory_conformance.suite.stateful"):
        loader = sys.modules[name].__loader__
        assert type(loader).__name__ == "AssertionRewritingHook", name


def test_every_registered_provider_has_a_conformance_class() -> None:
    """Our own providers get no exemption: a registered provider without a
    ``ProviderConformance`` subclass in tests/conformance fails here."""
    from governed_memory.plugins import PluginManager

    here = Path(__file__).parent
    covered = set()
    # A provider's own test folder may hold its class (tests/mem0/test_mem0_conformance.py).
    for path in sorted(here.parent.glob("*/test_*_conformance.py")):
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module = __import__(path.stem)
        covered |= {cls.provider_name for cls in vars(module).values()
                    if isinstance(cls, type) and issubclass(cls, ProviderConformance)}
    registered = {registration.name for registration in PluginManager.load().providers.all()}
    assert registered <= covered, f"providers without a conformance class: {registered - covered}"


# -- the store suites ------------------------------------------------------------------------

STORE_MODULE = '''
from broken_stores import {store}
from governed_memory_conformance import {suite}


class TestStore({suite}):
    async def make_store(self, clock):
        store = {store}()
        if hasattr(store, "start"):
            await store.start()
        return store
'''

BROKEN_STORES = {
    "RenumberingTurnStore": ("TurnStoreConformance",
                             {"test_numbers_keep_counting_after_a_clear"}),
    "UserWideTurnStore": ("TurnStoreConformance",
                          {"test_sessions_users_and_tenants_are_isolated"}),
    "StickyWorkingStateStore": ("WorkingStateStoreConformance",
                                {"test_state_expires_at_its_ttl"}),
    "BlindFillCacheStore": ("CacheStoreConformance",
                            {"test_a_fill_under_moved_revisions_is_refused"}),
}


@pytest.mark.parametrize("store", sorted(BROKEN_STORES))
def test_a_broken_store_fails_its_suite(pytester: pytest.Pytester, store: str) -> None:
    suite, expected = BROKEN_STORES[store]
    pytester.makepyfile(test_subject=STORE_MODULE.format(store=store, suite=suite))
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED)
    assert reprec.ret == pytest.ExitCode.TESTS_FAILED
    failed = {name for name, outcome in outcomes(reprec).items() if outcome == "failed"}
    assert expected <= failed, f"not caught by: {sorted(expected - failed)}"


BROKEN_BLOCK_STORES_MODULE = '''
from governed_memory.tiers.blocks import BlockVersion, InMemoryBlockStore


class LastWriterWinsBlockStore(InMemoryBlockStore):
    """No compare-and-set: every write becomes the next version, whatever it expected."""

    async def write(self, scope, name, value, *, expected_version, edit, now):
        versions = self._versions.get((scope.scope_hash, name), [])
        newest = versions[-1].version if versions else 0
        return await super().write(scope, name, value, expected_version=newest, edit=edit,
                                   now=now)


class UserWideBlockStore(InMemoryBlockStore):
    """Keys blocks by tenant and user, so a user's sessions and agents share one block."""

    @staticmethod
    def _user(scope):
        return type(scope)(scope.tenant_id, user_id=scope.user_id)

    async def current(self, scope, names):
        return {n: BlockVersion(scope.scope_hash, n, v.version, v.value, v.edit,
                                v.updated_at)
                for n, v in (await super().current(self._user(scope), names)).items()}

    async def write(self, scope, name, value, *, expected_version, edit, now):
        v = await super().write(self._user(scope), name, value,
                                expected_version=expected_version, edit=edit, now=now)
        return BlockVersion(scope.scope_hash, name, v.version, v.value, v.edit, v.updated_at)


class TenantBlindErasureBlockStore(InMemoryBlockStore):
    """Erases a user id in every tenant."""

    async def delete_user(self, tenant_id, user_id):
        return sum([await super().delete_user(tenant, user_id)
                    for tenant in {t for t, _ in self._owners.values()}])


class OldestFirstBlockStore(InMemoryBlockStore):
    """History oldest first."""

    async def history(self, scope, name, *, before_version, limit):
        return tuple(reversed(await super().history(
            scope, name, before_version=before_version, limit=limit)))
'''

BROKEN_BLOCK_STORES = {
    "LastWriterWinsBlockStore": {"test_a_stale_write_is_refused_and_writes_nothing",
                                 "test_concurrent_writers_of_one_version_exactly_one_wins"},
    "UserWideBlockStore": {"test_scopes_and_tenants_are_isolated"},
    "TenantBlindErasureBlockStore": {"test_delete_user_removes_exactly_that_users_versions"},
    "OldestFirstBlockStore": {"test_history_is_newest_first_and_pages"},
}


@pytest.mark.parametrize("store", sorted(BROKEN_BLOCK_STORES))
def test_a_broken_block_store_fails_its_suite(pytester: pytest.Pytester, store: str) -> None:
    pytester.makepyfile(broken_block_stores=BROKEN_BLOCK_STORES_MODULE)
    pytester.makepyfile(test_subject=STORE_MODULE.replace("broken_stores", "broken_block_stores")
                        .format(store=store, suite="BlockStoreConformance"))
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED)
    assert reprec.ret == pytest.ExitCode.TESTS_FAILED
    failed = {name for name, outcome in outcomes(reprec).items() if outcome == "failed"}
    expected = BROKEN_BLOCK_STORES[store]
    assert expected <= failed, f"not caught by: {sorted(expected - failed)}"


def test_the_built_in_stores_pass_their_suites(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_subject="""
        from governed_memory.cache import InMemoryCacheStore
        from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore
        from governed_memory.tiers.blocks import InMemoryBlockStore
        from governed_memory_conformance import (
            BlockStoreConformance, CacheStoreConformance, TurnStoreConformance,
            WorkingStateStoreConformance)

        class TestTurns(TurnStoreConformance):
            async def make_store(self, clock):
                return InMemoryTurnStore()

        class TestWorking(WorkingStateStoreConformance):
            async def make_store(self, clock):
                return InMemoryWorkingStateStore()

        class TestCache(CacheStoreConformance):
            async def make_store(self, clock):
                return InMemoryCacheStore()

        class TestBlocks(BlockStoreConformance):
            async def make_store(self, clock):
                return InMemoryBlockStore()
    """)
    reprec = pytester.inline_run(*PLUGIN, *ISOLATED)
    assert reprec.ret == pytest.ExitCode.OK
    assert set(outcomes(reprec).values()) <= {"passed", "skipped"}


def test_overriding_a_store_suite_test_without_xfail_fails_the_run(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_subject="""
        from governed_memory.tiers import InMemoryWorkingStateStore
        from governed_memory_conformance import WorkingStateStoreConformance

        class TestWorking(WorkingStateStoreConformance):
            async def make_store(self, clock):
                return InMemoryWorkingStateStore()

            def test_state_expires_at_its_ttl(self):
                pass
    """)
    result = pytester.runpytest_inprocess(*PLUGIN, *ISOLATED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*TestWorking.test_state_expires_at_its_ttl overrides a "
                                 "suite test without pytest.mark.xfail*"])


def test_every_registered_store_has_a_conformance_class() -> None:
    """Turn, working-state, block and cache stores registered through plugins get no
    exemption."""
    import test_store_conformance as module
    from governed_memory.plugins import PluginManager
    from governed_memory_conformance import (
        BlockStoreConformance,
        CacheStoreConformance,
        TurnStoreConformance,
        WorkingStateStoreConformance,
    )

    plugins = PluginManager.load()
    for kind, suite in (("turn_stores", TurnStoreConformance),
                        ("working_state_stores", WorkingStateStoreConformance),
                        ("block_stores", BlockStoreConformance),
                        ("cache_stores", CacheStoreConformance)):
        covered = {cls.store_name for cls in vars(module).values()
                   if isinstance(cls, type) and issubclass(cls, suite) and cls is not suite}
        registered = {registration.name for registration in getattr(plugins, kind).all()}
        assert registered <= covered, f"{kind} without a conformance class: {registered - covered}"


def test_pytest_asyncio_stays_quiet_when_the_project_never_configured_it(
        pytester: pytest.Pytester) -> None:
    """The suite does not use pytest-asyncio; loading it must not make pytest-asyncio warn
    about its unset fixture loop scope (and a project's own choice is kept)."""
    pytest.importorskip("pytest_asyncio")
    write_module(pytester, "ExampleProvider", module="example_provider")
    quiet = pytester.runpytest_inprocess(*PLUGIN, "-p", "no:cacheprovider", "-p", "asyncio",
                                         "-k", "round_trips", "-W", "error::DeprecationWarning")
    quiet.assert_outcomes(passed=1)
    assert "asyncio_default_fixture_loop_scope\" is unset" not in quiet.stdout.str()
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    chosen = pytester.runpytest_inprocess(*PLUGIN, "-p", "no:cacheprovider", "-p", "asyncio",
                                          "-k", "round_trips")
    chosen.assert_outcomes(passed=1)
    chosen.stdout.fnmatch_lines(["*asyncio_default_fixture_loop_scope=function*"])


def test_the_guide_names_every_suite_test() -> None:
    """docs/writing-a-provider.md lists the suite's tests by area; a new test joins it."""
    from governed_memory_conformance.stores import SUITES

    guide = (Path(__file__).parents[2] / "docs" / "writing-a-provider.md").read_text(
        encoding="utf-8")
    unnamed = sorted(name for name in suite_tests()
                     if f"`{name}" not in guide and not name.endswith("_thorough"))
    assert not unnamed, f"suite tests the guide does not name: {unnamed}"
    assert all(suite.__name__ in guide for suite in SUITES)


def test_the_guide_documents_every_capability_flag_and_its_default() -> None:
    import re
    from pathlib import Path

    import attrs
    from governed_memory.capabilities import Capabilities

    guide = (Path(__file__).resolve().parents[2] / "docs" / "writing-a-provider.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (required|`[^`]+`) \|", guide, re.M)
    expected = [(f.name, "required" if f.default is attrs.NOTHING else f"`{f.default}`")
                for f in attrs.fields(Capabilities)]
    assert rows == expected
