"""Token budgets. An injected counter wins; the default is an approximation that
needs no tokenizer: about four ASCII characters per token, and every non-ASCII
character counted as one (CJK and emoji are roughly a token each, so the estimate errs
on the side of fitting)."""

from __future__ import annotations

from collections.abc import Callable

from governed_memory.tiers.turns import Turn

TokenCounter = Callable[[str], int]

MESSAGE_OVERHEAD_TOKENS = 4
"""Role and separators a chat format adds around every message."""


def approximate_tokens(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


def turn_tokens(turn: Turn, counter: TokenCounter = approximate_tokens) -> int:
    total = MESSAGE_OVERHEAD_TOKENS + counter(turn.content)
    for call in turn.tool_calls:
        total += counter(call.name) + counter(call.arguments) + MESSAGE_OVERHEAD_TOKENS
    return total


def window_tokens(turns: tuple[Turn, ...], counter: TokenCounter = approximate_tokens) -> int:
    return sum(turn_tokens(t, counter) for t in turns)
