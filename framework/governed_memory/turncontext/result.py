"""``MemoryContext``: everything one turn gets from memory, immutable."""

from __future__ import annotations

import attrs

from governed_memory.records import MemoryType
from governed_memory.tiers.blocks import Block
from governed_memory.tiers.turns import Role, Turn
from governed_memory.turncontext.budget import BudgetCut
from governed_memory.turncontext.recall import RecalledMemory, recalled_entity_ids
from governed_memory.turncontext.render import memory_text


@attrs.frozen(slots=True)
class MemoryContext:
    question: str
    messages: tuple[Turn, ...]
    """The verbatim window to replay, oldest first (the history before this turn)."""
    summary: str | None
    """The rolling session summary covering the turns before the window, if any."""
    standalone_query: str
    """What retrieval searched for."""
    rewritten: bool
    wanted_types: tuple[MemoryType, ...]
    recalled: tuple[RecalledMemory, ...]
    """Long-term memories, ranked and within the block budget."""
    memory_block: str
    """``recalled`` rendered as quoted data with an explicit boundary ("" if none)."""
    anchor_entity_ids: tuple[str, ...]
    degraded: tuple[str, ...]
    """What this turn had to do without (``recall.search_failed.user``, ...)."""
    window_tokens: int
    block_tokens: int
    summary_version: int | None = None
    """The version of the summary the prompt got (``None``: none, or the total cut it)."""
    blocks: tuple[Block, ...] = ()
    """Every memory block the profile declares, as the agent may edit them."""
    blocks_text: str = ""
    """``blocks`` rendered as quoted data with an explicit boundary ("" if none)."""
    blocks_tokens: int = 0
    summary_tokens: int = 0
    """What the summary costs as the prompt shows it (with its header)."""
    total_tokens: int = 0
    """What memory adds to the prompt: ``memory_text`` counted as one string plus the
    window's messages, by the builder's counter. Never above ``total_budget_tokens``."""
    total_budget_tokens: int | None = None
    """The policy's total this context was divided within (``None``: no total)."""
    cuts: tuple[BudgetCut, ...] = ()
    """What the total took from each part (``blocks``, ``window``, ``summary``,
    ``recalled``), in that order; empty when everything fitted."""

    @property
    def memory_text(self) -> str:
        """What ``prompt_messages`` appends to the system prompt: the blocks, the
        summary and the recalled memories, each as quoted data ("" if none)."""
        return memory_text(self.blocks_text, self.summary, self.memory_block)

    @property
    def recalled_entity_ids(self) -> tuple[str, ...]:
        return recalled_entity_ids(self.recalled)

    def prompt_messages(self, system: str) -> list[dict[str, object]]:
        """OpenAI-style messages: the system prompt with the memory blocks, the summary
        and the recalled memories appended as data, the window, then the question."""
        data = self.memory_text
        content = f"{system}\n\n{data}" if system and data else system or data
        messages: list[dict[str, object]] = [{"role": "system", "content": content}]
        for turn in self.messages:
            message: dict[str, object] = {"role": turn.role.value, "content": turn.content}
            if turn.role is Role.TOOL:
                message["tool_call_id"] = turn.tool_call_id
            if turn.tool_calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments}}
                    for c in turn.tool_calls]
            messages.append(message)
        messages.append({"role": "user", "content": self.question})
        return messages
