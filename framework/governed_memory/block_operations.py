"""The manager's memory-block operations: an agent's blocks beside its memories.

A manager built from a profile that declares blocks (``[blocks.<name>]`` kept by
``[stores.blocks]``) owns their store: it starts and closes it with the provider, and
every view of the manager (a bound handle, the sync facade, the tiers facade) reaches
the same blocks through these methods. Each is :class:`~governed_memory.tiers.
block_ops.MemoryBlocks`' own, over a port beside the manager's, so one trail, one
profile and one set of policies cover blocks and memories alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from governed_memory.errors import MemoryConfigurationError
from governed_memory.governed_calls import GovernedCalls
from governed_memory.principal import Principal
from governed_memory.scope import Scope
from governed_memory.tiers.block_ops import MemoryBlocks
from governed_memory.tiers.blocks import Block, BlockHistory

NOT_CONFIGURED = ("this manager keeps no memory blocks: a profile declares each as "
                  "[blocks.<name>] and the store that keeps them as [stores.blocks]")


class BlockOperations(GovernedCalls):
    """Read and edit the blocks the profile declares, one governed operation each."""

    block_ops: MemoryBlocks | None
    """The blocks, when the manager keeps them (``None`` otherwise)."""

    @property
    def blocks(self) -> MemoryBlocks:
        if self.block_ops is None:
            raise MemoryConfigurationError(NOT_CONFIGURED)
        return self.block_ops

    async def read_blocks(self, principal: Principal, scope: Scope,
                          names: Iterable[str] | None = None) -> tuple[Block, ...]:
        """The named blocks, or every declared one the scope can address, in the
        profile's order (a block never edited reads as its initial text, version 0)."""
        blocks = self.blocks
        await self._ready()
        return await blocks.read(principal, scope, names)

    async def append_block(self, principal: Principal, scope: Scope, name: str, text: str, *,
                           expected_version: int | None = None) -> Block:
        """Add ``text`` as a new line of block ``name``; ``expected_version`` makes it a
        compare-and-set (``MemoryConflictError`` when the block moved on)."""
        blocks = self.blocks
        await self._ready()
        return await blocks.append(principal, scope, name, text,
                                   expected_version=expected_version)

    async def replace_block(self, principal: Principal, scope: Scope, name: str, old: str,
                            new: str, *, expected_version: int | None = None) -> Block:
        """Swap the one occurrence of ``old`` in block ``name`` for ``new``."""
        blocks = self.blocks
        await self._ready()
        return await blocks.replace(principal, scope, name, old, new,
                                    expected_version=expected_version)

    async def rethink_block(self, principal: Principal, scope: Scope, name: str, value: str,
                            *, expected_version: int | None = None) -> Block:
        """Write block ``name`` anew."""
        blocks = self.blocks
        await self._ready()
        return await blocks.rethink(principal, scope, name, value,
                                    expected_version=expected_version)

    async def block_history(self, principal: Principal, scope: Scope, name: str, *,
                            before_version: int | None = None,
                            limit: int = 20) -> BlockHistory:
        """Stored versions of block ``name``, newest first."""
        blocks = self.blocks
        await self._ready()
        return await blocks.history(principal, scope, name, before_version=before_version,
                                    limit=limit)
