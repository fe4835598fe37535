"""Typed requests for the memory blocks, shaped like the other tiers' requests.

An edit reaches the port as the block's whole new text (``value``) and the version it
was computed from, whatever verb the agent used: policies read and may rewrite exactly
what will be stored (the secret guard scans it like a memory's content), and the store
only has to compare and set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import check_int
from governed_memory.operations import Operation
from governed_memory.profiles.blocks import MAX_BLOCK_CHARS, is_block_name
from governed_memory.request import Request
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import (
    MAX_BLOCK_HISTORY_PAGE,
    Block,
    BlockEdit,
    BlockHistory,
    BlocksErased,
    BlockSet,
)
from governed_memory.tiers.requests import TierUserErasure

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.tiers.adapters import BlockTier


def check_block_name(name: object, field: str = "name") -> str:
    if not is_block_name(name):
        raise MemoryValidationError(
            f"{field} must be a block name (lowercase letters, digits and '_', a letter "
            "first, at most 64 characters)", field=field)
    assert isinstance(name, str)
    return name


def check_block_text(value: object, field: str, limit: int = MAX_BLOCK_CHARS, *,
                     allow_empty: bool = True) -> str:
    """A block's text (or an edit's piece of it): a string without NUL, within
    ``limit`` characters; the message says by how much it is over."""
    if not isinstance(value, str):
        raise MemoryValidationError(f"{field} must be a string", field=field)
    if not allow_empty and not value:
        raise MemoryValidationError(f"{field} cannot be empty", field=field)
    if "\x00" in value:
        raise MemoryValidationError(f"{field} cannot hold NUL", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryValidationError(f"{field} is not valid Unicode text", field=field) from None
    if len(value) > limit:
        raise MemoryValidationError(
            f"{field} would be {len(value)} characters; the block holds at most {limit} "
            f"({len(value) - limit} over): shorten it or rethink the block", field=field)
    return value


def _scope(scope: object) -> None:
    if not isinstance(scope, Scope):
        raise MemoryValidationError("scope must be a Scope", field="scope")


@attrs.frozen(slots=True, kw_only=True)
class ReadBlocksRequest(Request[BlockSet]):
    """Blocks of one exact scope (every block the profile declares at that scope's
    level, or the named ones)."""

    operation: ClassVar[Operation] = Operation.READ_BLOCKS

    scope: Scope
    names: tuple[str, ...]

    def validate(self) -> None:
        _scope(self.scope)
        if not isinstance(self.names, tuple) or not self.names:
            raise MemoryValidationError("names must name at least one block", field="names")
        for i, name in enumerate(self.names):
            check_block_name(name, f"names[{i}]")

    async def send(self, target: BlockTier, ctx: OperationContext) -> BlockSet:
        return await target.read(self.scope, self.names)


@attrs.frozen(slots=True, kw_only=True)
class EditBlockRequest(Request[Block]):
    """Write the next version of one block: ``value`` is its whole new text, computed
    from version ``expected_version`` (0 for a block never written)."""

    operation: ClassVar[Operation] = Operation.EDIT_BLOCK

    scope: Scope
    name: str
    value: str
    expected_version: int
    edit: str
    limit: int = MAX_BLOCK_CHARS

    def validate(self) -> None:
        _scope(self.scope)
        check_block_name(self.name)
        check_int(self.limit, "limit", minimum=1, maximum=MAX_BLOCK_CHARS)
        check_block_text(self.value, "value", self.limit)
        check_int(self.expected_version, "expected_version", minimum=0)
        if self.edit not in BlockEdit.KINDS:
            raise MemoryValidationError("edit must be replace, append or rethink",
                                        field="edit")

    def traced_text(self) -> dict[str, str]:
        return {"gen_ai.memory.content": self.value}

    async def send(self, target: BlockTier, ctx: OperationContext) -> Block:
        return await target.write(self.scope, self.name, self.value,
                                  expected_version=self.expected_version, edit=self.edit,
                                  now=ctx.now)


@attrs.frozen(slots=True, kw_only=True)
class BlockHistoryRequest(Request[BlockHistory]):
    """Versions of one block, newest first; ``before_version`` pages back."""

    operation: ClassVar[Operation] = Operation.BLOCK_HISTORY

    scope: Scope
    name: str
    before_version: int | None = None
    limit: int = 20

    def validate(self) -> None:
        _scope(self.scope)
        check_block_name(self.name)
        if self.before_version is not None:
            check_int(self.before_version, "before_version", minimum=1)
        check_int(self.limit, "limit", minimum=1, maximum=MAX_BLOCK_HISTORY_PAGE)

    async def send(self, target: BlockTier, ctx: OperationContext) -> BlockHistory:
        versions = await target.store.history(self.scope, self.name,
                                              before_version=self.before_version,
                                              limit=self.limit)
        return BlockHistory(self.scope.scope_hash, self.name, tuple(versions)[:self.limit])


@attrs.frozen(slots=True, kw_only=True)
class EraseUserBlocksRequest(TierUserErasure[BlocksErased]):
    """Every version of every block of one user in one tenant."""

    operation: ClassVar[Operation] = Operation.ERASE_USER_BLOCKS

    async def send(self, target: BlockTier, ctx: OperationContext) -> BlocksErased:
        removed = await target.store.delete_user(self.tenant_id, self.user_id)
        return BlocksErased(self.subject_scope_hash(), removed)
