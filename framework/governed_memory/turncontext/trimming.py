"""Token-trimming the verbatim window.

Keep the newest turns that fit the budget, then open the window on a user turn, so it
never starts with a tool result cut off from the assistant call that produced it (or
with an assistant reply to a question that is no longer there). When the fitting part
holds no user turn (one question followed by a long tool chain), the window opens on
its first turn that is not a tool result. A budget too small for even the newest turn
keeps that turn anyway (with the assistant call it answers, if it is a tool result),
and says so: the window is then over budget, which the builder records as degraded.
"""

from __future__ import annotations

from governed_memory.tiers.turns import Role, Turn
from governed_memory.turncontext.tokens import TokenCounter, turn_tokens


def trim(turns: tuple[Turn, ...], budget: int,
         counter: TokenCounter) -> tuple[tuple[Turn, ...], bool]:
    """``(window, over_budget)``."""
    if not turns:
        return (), False
    start, total = len(turns), 0
    for index in range(len(turns) - 1, -1, -1):
        cost = turn_tokens(turns[index], counter)
        if total + cost > budget:
            break
        total += cost
        start = index
    suffix = turns[start:]
    for index, turn in enumerate(suffix):
        if turn.role is Role.USER:
            return suffix[index:], False
    for index, turn in enumerate(suffix):
        if turn.role is not Role.TOOL:
            return suffix[index:], False
    return _newest_unit(turns), True


def _newest_unit(turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
    """The newest turn, and for a tool result everything back to the call it answers."""
    index = len(turns) - 1
    while index > 0 and turns[index].role is Role.TOOL:
        index -= 1
    return turns[index:]


def keep_boundary(turns: tuple[Turn, ...], keep: int) -> int:
    """Where the verbatim part starts after a summary refresh: ``keep`` turns from the
    end, walked back to the nearest user turn. 0 means nothing is older than the
    boundary (the whole window is one user turn), so nothing is summarized."""
    index = max(0, len(turns) - keep)
    while index > 0 and turns[index].role is not Role.USER:
        index -= 1
    return index
