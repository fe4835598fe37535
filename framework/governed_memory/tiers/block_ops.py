"""``MemoryBlocks``: what an agent does with its blocks, each step a governed call.

The three verbs are Letta's: ``replace`` swaps one exact passage (it must occur once,
so an agent never edits a passage it did not mean), ``append`` adds a line, ``rethink``
writes the whole text anew. Each reads the block through the port, computes the new
text, and writes it compare-and-set on the version it read. A caller that names
``expected_version`` gets a conflict if the block moved on; one that does not has the
edit re-applied on the newer text (a few times at most), so concurrent appends by two
agents both land and neither is lost.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError, MemoryValidationError
from governed_memory.governed_calls import build_request
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.principal import Principal
from governed_memory.profiles.blocks import BlockSection
from governed_memory.request import Request
from governed_memory.scope import Scope, narrow
from governed_memory.tiers.block_requests import (
    BlockHistoryRequest,
    EditBlockRequest,
    EraseUserBlocksRequest,
    ReadBlocksRequest,
    check_block_name,
    check_block_text,
)
from governed_memory.tiers.blocks import Block, BlockEdit, BlockHistory, BlocksErased, BlockSet
from governed_memory.tiers.owners import owner_scope
from governed_memory.turncontext.scoping import addressable

T = TypeVar("T")

EDIT_ATTEMPTS = 4
"""How often an edit without ``expected_version`` is re-applied after a conflict."""

Build = Callable[[], Request[T]]


def replaced(value: str, old: str, new: str) -> str:
    """``value`` with the one occurrence of ``old`` swapped for ``new``."""
    count = value.count(old)
    if count == 0:
        raise MemoryValidationError("old does not occur in the block: read it again and "
                                    "quote the passage exactly", field="old")
    if count > 1:
        raise MemoryValidationError(f"old occurs {count} times in the block: quote more of "
                                    "the passage so it occurs once", field="old")
    return value.replace(old, new, 1)


def appended(value: str, text: str) -> str:
    return f"{value}\n{text}" if value else text


class MemoryBlocks:
    """The blocks a profile declares, over one governed port."""

    def __init__(self, port: ActivityPort, specs: Mapping[str, BlockSection]) -> None:
        self._port = port
        self.specs = dict(specs)

    @property
    def names(self) -> tuple[str, ...]:
        """Every declared block, in declaration order."""
        return tuple(self.specs)

    def spec(self, name: object) -> BlockSection:
        checked = check_block_name(name)
        spec = self.specs.get(checked)
        if spec is None:
            raise MemoryNotFoundError(f"no block named {checked!r} is declared by the "
                                      f"profile (declared: {', '.join(self.specs) or 'none'})")
        return spec

    def scope_of(self, principal: Principal, scope: Scope, name: str) -> Scope:
        """The exact scope block ``name`` lives at for this owner."""
        return narrow(owner_scope(principal, scope), self.spec(name).level)

    # -- reading ------------------------------------------------------------------------

    async def read(self, principal: Principal, scope: Scope,
                   names: Iterable[str] | None = None) -> tuple[Block, ...]:
        """The named blocks, declaration order; one governed read per scope level they
        live at. Without names, every declared block the scope can address: a
        session-level block needs a ``session_id``, and a scope without one reads the
        user's blocks rather than failing on the session's."""
        wanted = self.names if names is None else tuple(dict.fromkeys(names))
        if names is not None and not wanted:
            raise MemoryValidationError("names must name at least one block", field="names")
        owner = owner_scope(principal, scope)
        if names is None:
            wanted = tuple(n for n in wanted if addressable(owner, self.specs[n].level))
        by_scope: dict[str, tuple[Scope, list[str]]] = {}
        for name in wanted:
            target = self.scope_of(principal, scope, name)
            by_scope.setdefault(target.scope_hash, (target, []))[1].append(name)
        found: dict[str, Block] = {}
        for target, group in by_scope.values():
            blocks: BlockSet = await self._read(principal, target, tuple(group))
            found.update((block.name, block) for block in blocks.blocks)
        return tuple(found[name] for name in wanted)

    async def get(self, principal: Principal, scope: Scope, name: str) -> Block:
        (block,) = await self.read(principal, scope, (name,))
        return block

    async def _read(self, principal: Principal, target: Scope,
                    names: tuple[str, ...]) -> BlockSet:
        return await self._execute(principal, Operation.READ_BLOCKS,
                                   lambda: ReadBlocksRequest(scope=target, names=names))

    async def history(self, principal: Principal, scope: Scope, name: str, *,
                      before_version: int | None = None, limit: int = 20) -> BlockHistory:
        """Stored versions of one block, newest first (a block never edited has none)."""
        target = self.scope_of(principal, scope, name)
        return await self._execute(
            principal, Operation.BLOCK_HISTORY,
            lambda: BlockHistoryRequest(scope=target, name=name,
                                        before_version=before_version, limit=limit))

    # -- editing ------------------------------------------------------------------------

    async def replace(self, principal: Principal, scope: Scope, name: str, old: str,
                      new: str, *, expected_version: int | None = None) -> Block:
        """Swap the one occurrence of ``old`` for ``new`` (``new`` may be empty)."""
        check_block_text(old, "old", allow_empty=False)
        check_block_text(new, "new")
        return await self._edit(principal, scope, name, BlockEdit.REPLACE,
                                lambda value: replaced(value, old, new), expected_version)

    async def append(self, principal: Principal, scope: Scope, name: str, text: str, *,
                     expected_version: int | None = None) -> Block:
        """Add ``text`` as a new line at the end."""
        check_block_text(text, "text", allow_empty=False)
        return await self._edit(principal, scope, name, BlockEdit.APPEND,
                                lambda value: appended(value, text), expected_version)

    async def rethink(self, principal: Principal, scope: Scope, name: str, value: str, *,
                      expected_version: int | None = None) -> Block:
        """Write the whole block anew (an empty ``value`` empties it)."""
        check_block_text(value, "value")
        return await self._edit(principal, scope, name, BlockEdit.RETHINK,
                                lambda _: value, expected_version)

    async def _edit(self, principal: Principal, scope: Scope, name: str, edit: str,
                    compute: Callable[[str], str], expected_version: int | None) -> Block:
        spec = self.spec(name)
        if expected_version is not None and (isinstance(expected_version, bool) or not
                                             isinstance(expected_version, int)
                                             or expected_version < 0):
            raise MemoryValidationError("expected_version must be a non-negative integer",
                                        field="expected_version")
        target = self.scope_of(principal, scope, name)
        attempts = 1 if expected_version is not None else EDIT_ATTEMPTS
        for attempt in range(attempts):
            (current,) = (await self._read(principal, target, (name,))).blocks
            value = check_block_text(compute(current.value), "value", spec.limit)
            # Named by the caller: the store compares with it (and refuses a moved
            # block as an evented conflict); otherwise the version just read.
            base = current.version if expected_version is None else expected_version
            request = functools.partial(EditBlockRequest, scope=target, name=name,
                                        value=value, expected_version=base, edit=edit,
                                        limit=spec.limit)
            try:
                return await self._execute(principal, Operation.EDIT_BLOCK, request)
            except MemoryConflictError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- erasure ------------------------------------------------------------------------

    async def erase_user(self, principal: Principal, tenant_id: str,
                         user_id: str) -> BlocksErased:
        """Every version of every block of one user (``memory:admin``)."""
        return await self._execute(
            principal, Operation.ERASE_USER_BLOCKS,
            lambda: EraseUserBlocksRequest(tenant_id=tenant_id, user_id=user_id))

    async def _execute(self, principal: Principal, operation: Operation,
                       build: Build[T]) -> T:
        request = await build_request(self._port, operation, principal, build)
        return await self._port.execute(request, principal)
