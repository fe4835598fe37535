"""One budget for the whole context: the total that blocks, window, summary and
recalled memories share, divided in that order and never exceeded.

Each part keeps its own budget (the window's ``recent_max_tokens``, the recalled
block's share of it, the summary's ``MAX_SUMMARY_CHARS``), and the total caps their
sum. The order says what a tight total keeps:

1. the memory blocks: the agent's own memory, in every prompt, first; a profile whose
   declared blocks cannot fit its total is refused at load;
2. the window: the turns the question follows from (it has its own cap already);
3. the rolling summary: it stands for everything older, and is the one part whose
   size the host does not choose (up to 8,000 characters), so it yields to the window;
4. the recalled memories: a ranked prefix, the cheapest to lose.

Cuts run the other way: recalled memories from the lowest ranked, then the summary
from its end (marked with an ellipsis), then the window from its oldest turns (still
opening on a user turn), then the blocks from the last declared block's value (marked
in the render). Every cut is recorded (``BudgetCut``: what, how much, about how many
tokens). The total is what memory adds to the prompt: ``memory_text`` (appended to
the host's system prompt) counted as one string, plus the window's messages. The
host's own system prompt and the question are the host's, outside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import attrs

from governed_memory.tiers.blocks import Block
from governed_memory.tiers.turns import Turn
from governed_memory.turncontext.recall import RecalledMemory, RecallResult
from governed_memory.turncontext.render import (
    SECTION_SEPARATOR,
    SUMMARY_HEADER,
    entry,
    memory_text,
    render_block,
    render_blocks,
)
from governed_memory.turncontext.tokens import TokenCounter, window_tokens
from governed_memory.turncontext.trimming import trim

PARTS: Final = ("blocks", "window", "summary", "recalled")
"""The division order; cuts run from its end."""
UNITS: Final = {"blocks": "chars", "window": "turns", "summary": "chars",
                "recalled": "memories"}
ELLIPSIS: Final = "\u2026"
"""Ends a summary the total cut short."""


@attrs.frozen(slots=True)
class BudgetCut:
    """What the total budget took from one part of the context."""

    part: str
    """``blocks``, ``window``, ``summary`` or ``recalled``."""
    removed: int
    """How much it lost, in ``unit``: characters of block values or of the summary,
    turns, memories."""
    tokens: int
    """About how many tokens that was (the part's cost before, less after)."""

    @property
    def unit(self) -> str:
        return UNITS[self.part]

    def __str__(self) -> str:
        return f"{self.part}: -{self.removed} {self.unit} (-{self.tokens} tokens)"


@attrs.frozen(slots=True)
class Divided:
    """The parts as the prompt gets them."""

    blocks_text: str
    window: tuple[Turn, ...]
    summary: str | None
    recalled: tuple[RecalledMemory, ...]
    memory_block: str
    block_tokens: int
    summary_tokens: int
    total_tokens: int
    cuts: tuple[BudgetCut, ...] = ()


class _Division:
    """The running division of one turn's total: what is placed is measured as the
    prompt will hold it (the memory text joined and counted whole, the window's
    messages added), so every fit is exact for any counter, and the last fit is the
    prompt's cost."""

    def __init__(self, total: int | None, counter: TokenCounter) -> None:
        self.total = total
        self.count = counter
        self.sections: list[str] = []
        self.window_cost = 0
        self.lost: dict[str, list[int]] = {}

    def cut(self, part: str, removed: int, tokens: int) -> None:
        if removed <= 0 and tokens <= 0:
            return
        seen = self.lost.setdefault(part, [0, 0])
        seen[0] += removed
        seen[1] += max(0, tokens)

    def cuts(self) -> tuple[BudgetCut, ...]:
        return tuple(BudgetCut(part, *self.lost[part]) for part in PARTS if part in self.lost)

    def spent(self, section: str = "", window_cost: int | None = None) -> int:
        """The prompt's cost with ``section`` appended to the memory text."""
        text = SECTION_SEPARATOR.join([*self.sections, section] if section else self.sections)
        window = self.window_cost if window_cost is None else window_cost
        return (self.count(text) if text else 0) + window

    def fits(self, section: str) -> bool:
        return self.total is None or self.spent(section) <= self.total

    def place(self, section: str) -> None:
        if section:
            self.sections.append(section)

    def blocks(self, blocks: Sequence[Block]) -> str:
        full = render_blocks(blocks)
        if self.fits(full):
            self.place(full)
            return full
        # From the last declared block backward: its value as long as still fits.
        shown = {b.name: b.chars for b in blocks}
        text = ""
        for block in reversed(blocks):
            def fits(n: int, name: str = block.name) -> bool:
                return self.fits(render_blocks(blocks, {**shown, name: n}))

            keep = _longest(0, block.chars - 1, fits)
            if keep is not None:
                shown[block.name] = keep
                text = render_blocks(blocks, shown)
                break
            shown[block.name] = 0
        kept = sum(shown.values()) if text else 0
        self.cut("blocks", sum(b.chars for b in blocks) - kept,
                 self.count(full) - (self.count(text) if text else 0))
        self.place(text)
        return text

    def window(self, window: tuple[Turn, ...]) -> tuple[Turn, ...]:
        cost = window_tokens(window, self.count)
        if self.total is None or self.spent(window_cost=cost) <= self.total:
            self.window_cost = cost
            return window
        left = self.total - self.spent()
        kept, over = trim(window, left, self.count) if left > 0 else ((), True)
        if over:
            kept = ()
        self.window_cost = window_tokens(kept, self.count)
        self.cut("window", len(window) - len(kept), cost - self.window_cost)
        return kept

    def summary(self, summary: str | None) -> str | None:
        if not summary:
            return summary
        full = SUMMARY_HEADER + summary
        if self.fits(full):
            self.place(full)
            return summary
        keep = _longest(1, len(summary) - 1, lambda n: self.fits(
            SUMMARY_HEADER + summary[:n] + ELLIPSIS))
        text = summary[:keep] + ELLIPSIS if keep is not None else None
        self.cut("summary", len(summary) - (keep or 0),
                 self.count(full) - (self.count(SUMMARY_HEADER + text) if text else 0))
        if text is not None:
            self.place(SUMMARY_HEADER + text)
        return text

    def recalled(self, recalled: RecallResult) -> tuple[tuple[RecalledMemory, ...], str, int]:
        memories, block = recalled.memories, recalled.block
        if self.fits(block):
            self.place(block)
            return memories, block, recalled.block_tokens
        entries = [entry(m.record, m.level.value) for m in memories]
        keep = _longest(1, len(memories) - 1,
                        lambda n: self.fits(render_block(entries[:n]))) or 0
        kept_block = render_block(entries[:keep])
        kept_tokens = self.count(kept_block) if kept_block else 0
        self.cut("recalled", len(memories) - keep, recalled.block_tokens - kept_tokens)
        self.place(kept_block)
        return memories[:keep], kept_block, kept_tokens


def divide(total: int | None, counter: TokenCounter, *, blocks: Sequence[Block],
           window: tuple[Turn, ...], summary: str | None,
           recalled: RecallResult) -> Divided:
    """Blocks, window, summary and recalled memories within ``total`` (``None``: each
    as given), the cuts recorded."""
    division = _Division(total, counter)
    blocks_text = division.blocks(blocks)
    window = division.window(window)
    summary = division.summary(summary)
    memories, block, block_tokens = division.recalled(recalled)
    assert memory_text(blocks_text, summary, block) == SECTION_SEPARATOR.join(
        division.sections)
    return Divided(blocks_text=blocks_text, window=window, summary=summary,
                   recalled=memories, memory_block=block, block_tokens=block_tokens,
                   summary_tokens=counter(SUMMARY_HEADER + summary) if summary else 0,
                   total_tokens=division.spent(), cuts=division.cuts())


def _longest(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``n`` in ``[low, high]`` that fits (``None`` when ``low`` does not):
    a binary search, checked at the end, so a counter that is not monotone in the
    length still never yields a prefix that does not fit."""
    if high < low or not fits(low):
        return None
    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
