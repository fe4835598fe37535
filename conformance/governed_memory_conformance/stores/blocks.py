"""The block-store contract (``governed_memory.tiers.blocks.BlockStore``), for every store.

Versions of a named block per exact scope: numbered from 1 with no gaps, each written
by a compare-and-set on the newest version (a stale or racing writer gets the one
conflict :func:`~governed_memory.tiers.blocks.stale` words and writes nothing), read
newest first, several blocks' newest versions at once, scopes and tenants isolated,
erasure by user counted exactly, any text up to the largest block kept to the character,
and, for a durable store, every version there after a restart.
"""

from __future__ import annotations

import asyncio

import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConflictError
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import (
    MAX_BLOCK_CHARS,
    BlockEdit,
    BlockStore,
    BlockVersion,
    stale,
)

from governed_memory_conformance.harness import expect_error
from governed_memory_conformance.scopes import (
    CHILD,
    ELSEWHERE,
    HOME,
    NEIGHBOURS,
    PARENT,
    SAME_VALUE_OTHER_DIMENSION,
    SIBLING,
    TENANT,
)
from governed_memory_conformance.stores.base import StoreConformanceBase, store_scenario

PERSONA = "persona"
HUMAN = "human"

UNICODE_VALUES = (
    "",
    "plain ascii",
    "zoé, zoe\u0301, ÅNGSTRÖM, straße, ﬁ ligature",
    "日本語のテキスト、中文、한국어",
    "עברית ومرحبا بالعربية (right to left)",
    "emoji \U0001f469\u200d\U0001f4bb\U0001f3f3\ufe0f\u200d\U0001f308 and astral "
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522",
    "  leading and trailing blanks \t\r\n  ",
    "line one\nline two\r\nline three\u2028after a line separator",
    "quotes ' \" ` and a backslash \\ and 100% of _wildcards_",
    "'); DROP TABLE memory_block_versions; --",
    "\u200b\u200d\ufeff invisible and \U0010fffd private use",
)


def _largest_value() -> str:
    """A value of exactly :data:`MAX_BLOCK_CHARS` characters, mixing one-, two-, three- and
    four-byte UTF-8 so a store that counts bytes, or truncates, shows it."""
    pattern = "aé€𝄞\n"
    value = (pattern * (MAX_BLOCK_CHARS // len(pattern) + 1))[:MAX_BLOCK_CHARS]
    assert len(value) == MAX_BLOCK_CHARS
    return value


async def _write_versions(store: BlockStore, scope: Scope, name: str, count: int,
                          start: float = 100.0) -> list[BlockVersion]:
    """Versions 1..count of one block, each value naming its scope, block and number."""
    return [await store.write(scope, name, f"{name}@{scope.scope_hash[-6:]} v{n}",
                              expected_version=n - 1, edit=BlockEdit.RETHINK,
                              now=start + n)
            for n in range(1, count + 1)]


class BlockStoreConformance(StoreConformanceBase[BlockStore]):
    """Subclass and implement ``make_store(clock)`` (and ``reopen_store`` if durable)."""

    @store_scenario
    async def test_a_block_never_written_has_no_version(self, store: BlockStore,
                                                         clock: ManualClock) -> None:
        assert isinstance(store, BlockStore), "make_store returned no BlockStore"
        assert dict(await store.current(HOME, [PERSONA])) == {}, (
            "a block never written has no stored version (it reads as version 0)")
        assert dict(await store.current(HOME, [])) == {}
        assert await store.history(HOME, PERSONA, before_version=None, limit=10) == ()

    @store_scenario
    async def test_writes_number_versions_from_one(self, store: BlockStore,
                                                   clock: ManualClock) -> None:
        first = await store.write(HOME, PERSONA, "I am helpful.", expected_version=0,
                                  edit=BlockEdit.RETHINK, now=100.5)
        assert first == BlockVersion(HOME.scope_hash, PERSONA, 1, "I am helpful.",
                                     BlockEdit.RETHINK, 100.5), (
            "write returns version 1 with the scope, name, value, edit and time given")
        second = await store.write(HOME, PERSONA, "I am helpful.\nI am terse.",
                                   expected_version=1, edit=BlockEdit.APPEND, now=101.25)
        assert (second.version, second.edit, second.updated_at) == (2, BlockEdit.APPEND,
                                                                    101.25)
        assert dict(await store.current(HOME, [PERSONA])) == {PERSONA: second}, (
            "current is the newest version, exactly as written")
        third = await store.write(HOME, PERSONA, "I am terse.", expected_version=2,
                                  edit=BlockEdit.REPLACE, now=102.0)
        assert third.version == 3 and third.edit == BlockEdit.REPLACE
        assert await store.history(HOME, PERSONA, before_version=None, limit=10) == (
            third, second, first)

    @store_scenario
    async def test_a_stale_write_is_refused_and_writes_nothing(self, store: BlockStore,
                                                               clock: ManualClock) -> None:
        written = await _write_versions(store, HOME, PERSONA, 2)
        for expected in (0, 1, 3, 7, -1):
            error = await expect_error(
                MemoryConflictError,
                store.write(HOME, PERSONA, f"stale from {expected}",
                            expected_version=expected, edit=BlockEdit.RETHINK, now=200.0),
                f"a write expecting version {expected} of a block at version 2")
            assert str(error) == str(stale(PERSONA, expected, 2)), (
                "a conflict is raised by governed_memory.tiers.blocks.stale with the "
                "expected and the current version")
        assert dict(await store.current(HOME, [PERSONA])) == {PERSONA: written[-1]}, (
            "a refused write changed the block")
        assert await store.history(HOME, PERSONA, before_version=None, limit=10) == tuple(
            reversed(written)), "a refused write left a version behind"
        error = await expect_error(
            MemoryConflictError,
            store.write(HOME, HUMAN, "too early", expected_version=1,
                        edit=BlockEdit.RETHINK, now=200.0),
            "a write expecting version 1 of a block never written")
        assert str(error) == str(stale(HUMAN, 1, 0))
        assert dict(await store.current(HOME, [HUMAN])) == {}
        following = await store.write(HOME, PERSONA, "next", expected_version=2,
                                      edit=BlockEdit.RETHINK, now=201.0)
        assert following.version == 3, "refused writes must not use up version numbers"

    @store_scenario
    async def test_concurrent_writers_of_one_version_exactly_one_wins(
        self, store: BlockStore, clock: ManualClock
    ) -> None:
        await _write_versions(store, HOME, PERSONA, 1)
        outcomes = await asyncio.gather(
            *(store.write(HOME, PERSONA, f"writer {i}", expected_version=1,
                          edit=BlockEdit.RETHINK, now=300.0 + i) for i in range(20)),
            return_exceptions=True)
        won = [o for o in outcomes if isinstance(o, BlockVersion)]
        lost = [o for o in outcomes if isinstance(o, MemoryConflictError)]
        assert len(won) == 1 and len(lost) == 19, (
            f"20 writers expecting version 1: {len(won)} won, {len(lost)} conflicted, "
            f"others raised {[o for o in outcomes if o not in won and o not in lost]!r}")
        assert won[0].version == 2
        assert all(str(e) == str(stale(PERSONA, 1, 2)) for e in lost), (
            "a writer that lost the race is told the block is at version 2")
        history = await store.history(HOME, PERSONA, before_version=None, limit=50)
        assert [v.version for v in history] == [2, 1] and history[0] == won[0], (
            "a lost race left a version behind, or the winner's version is not stored")

    @store_scenario
    async def test_current_reads_several_blocks_at_once(self, store: BlockStore,
                                                        clock: ManualClock) -> None:
        persona = await _write_versions(store, HOME, PERSONA, 3)
        human = await _write_versions(store, HOME, HUMAN, 1)
        current = await store.current(HOME, [HUMAN, "never-written", PERSONA])
        assert dict(current) == {HUMAN: human[-1], PERSONA: persona[-1]}, (
            "current returns the newest version of each written block and nothing for "
            "a block never written")
        assert dict(await store.current(HOME, ["never-written"])) == {}
        assert dict(await store.current(HOME, [PERSONA.upper(), "persona "])) == {}, (
            "block names are exact")

    @store_scenario
    async def test_history_is_newest_first_and_pages(self, store: BlockStore,
                                                     clock: ManualClock) -> None:
        written = await _write_versions(store, HOME, PERSONA, 5)
        await _write_versions(store, HOME, HUMAN, 2)

        async def page(before: int | None, limit: int) -> list[int]:
            versions = await store.history(HOME, PERSONA, before_version=before, limit=limit)
            assert all(v == written[v.version - 1] for v in versions), (
                "history returned a version other than the one written")
            return [v.version for v in versions]

        assert await page(None, 10) == [5, 4, 3, 2, 1], "history is newest first"
        assert await page(None, 2) == [5, 4], "limit keeps the newest"
        assert await page(4, 2) == [3, 2], "before_version pages to older versions"
        assert await page(2, 2) == [1]
        assert await page(1, 2) == []
        assert await page(99, 1) == [5]
        assert await page(None, 0) == []

    @store_scenario
    async def test_scopes_and_tenants_are_isolated(self, store: BlockStore,
                                                   clock: ManualClock) -> None:
        home = await _write_versions(store, HOME, PERSONA, 2)
        for other in NEIGHBOURS:
            assert dict(await store.current(other, [PERSONA])) == {}, (
                f"the block of {HOME} read from {other}")
            assert await store.history(other, PERSONA, before_version=None, limit=10) == (), (
                f"the history of {HOME} read from {other}")
            await expect_error(
                MemoryConflictError,
                store.write(other, PERSONA, "continues home?", expected_version=2,
                            edit=BlockEdit.RETHINK, now=400.0),
                f"a write in {other} expecting the version of the block in {HOME}")
            own = await store.write(other, PERSONA, f"own of {other}", expected_version=0,
                                    edit=BlockEdit.RETHINK, now=401.0)
            assert (own.version, own.scope_hash) == (1, other.scope_hash), (
                "every scope numbers its own versions")
        assert dict(await store.current(HOME, [PERSONA])) == {PERSONA: home[-1]}, (
            "a write in another scope changed this scope's block")
        assert await store.history(HOME, PERSONA, before_version=None, limit=10) == tuple(
            reversed(home))

    @store_scenario
    async def test_delete_user_removes_exactly_that_users_versions(
        self, store: BlockStore, clock: ManualClock
    ) -> None:
        alices = (HOME, CHILD)
        await _write_versions(store, HOME, PERSONA, 2)
        await _write_versions(store, HOME, HUMAN, 1)
        await _write_versions(store, CHILD, PERSONA, 3)
        kept = {scope: await _write_versions(store, scope, PERSONA, 2)
                for scope in (SIBLING, ELSEWHERE, SAME_VALUE_OTHER_DIMENSION, PARENT)}
        assert await store.delete_user(TENANT, "alice") == 6, (
            "delete_user returns how many versions went (2 + 1 + 3 for alice here)")
        for scope in alices:
            assert dict(await store.current(scope, [PERSONA, HUMAN])) == {}, (
                f"a block of {scope} outlived the erasure of its user")
            assert await store.history(scope, PERSONA, before_version=None, limit=10) == ()
        for scope, versions in kept.items():
            assert await store.history(scope, PERSONA, before_version=None, limit=10) == (
                tuple(reversed(versions))), (
                f"erasing alice of {TENANT} removed versions of {scope}")
        assert await store.delete_user(TENANT, "alice") == 0
        assert await store.delete_user(TENANT, "nobody") == 0
        again = await store.write(HOME, PERSONA, "after erasure", expected_version=0,
                                  edit=BlockEdit.RETHINK, now=500.0)
        assert again.version == 1, "an erased block reads as never written"

    @store_scenario
    async def test_any_text_up_to_the_largest_block_round_trips(
        self, store: BlockStore, clock: ManualClock
    ) -> None:
        written: list[BlockVersion] = []
        for n, value in enumerate((*UNICODE_VALUES, _largest_value()), start=1):
            stored = await store.write(HOME, PERSONA, value, expected_version=n - 1,
                                       edit=BlockEdit.RETHINK, now=1_700_000_000.123456 + n)
            assert stored.value == value
            written.append(stored)
            current = (await store.current(HOME, [PERSONA]))[PERSONA]
            assert current.value == value and len(current.value) == len(value), (
                f"version {n} did not read back character for character "
                f"({len(value)} characters written, {len(current.value)} read)")
            assert current.updated_at == stored.updated_at
        history = await store.history(HOME, PERSONA, before_version=None, limit=50)
        assert history == tuple(reversed(written))
        names = ("ünïcödé", "名前", "with space", "a" * 64)
        for name in names:
            await store.write(HOME, name, name, expected_version=0, edit=BlockEdit.APPEND,
                              now=1.0)
        assert {n: v.value for n, v in (await store.current(HOME, names)).items()} == {
            n: n for n in names}

    def test_written_versions_survive_a_reopen(self) -> None:
        if not self.store_is_durable():
            pytest.skip(f"{self.describe()} is not durable (durable = False)")
        largest = _largest_value()

        async def before(store: BlockStore, clock: ManualClock) -> None:
            await store.write(HOME, PERSONA, "first", expected_version=0,
                              edit=BlockEdit.RETHINK, now=1.0)
            await store.write(HOME, PERSONA, largest, expected_version=1,
                              edit=BlockEdit.APPEND, now=2.0)
            await store.write(SIBLING, HUMAN, "bob", expected_version=0,
                              edit=BlockEdit.RETHINK, now=3.0)

        async def after(store: BlockStore, clock: ManualClock) -> None:
            history = await store.history(HOME, PERSONA, before_version=None, limit=10)
            assert [(v.version, v.value, v.edit) for v in history] == [
                (2, largest, BlockEdit.APPEND), (1, "first", BlockEdit.RETHINK)], (
                "versions written before the restart are not all there after it")
            assert (await store.current(SIBLING, [HUMAN]))[HUMAN].value == "bob"
            await expect_error(MemoryConflictError,
                               store.write(HOME, PERSONA, "stale", expected_version=1,
                                           edit=BlockEdit.RETHINK, now=4.0),
                               "a write expecting a version older than the one stored "
                               "before the restart")
            following = await store.write(HOME, PERSONA, "third", expected_version=2,
                                          edit=BlockEdit.RETHINK, now=5.0)
            assert following.version == 3
            assert await store.delete_user(TENANT, "alice") == 3, (
                "erasure reaches versions written before the restart")

        self.run_across_reopen(before, after)
