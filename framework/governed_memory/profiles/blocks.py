"""The memory blocks a profile declares (``[blocks.<name>]``): Letta's core memory.

A block is declared, never created by an agent: the profile names each one, how many
characters it may hold, the scope level it lives at (``user``: one ``human`` block per
user, wherever they work) and the text it starts with. Declaring blocks needs a block
store (``[stores.blocks]``) and a store needs blocks, so neither is ever set without
an effect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import attrs

from governed_memory.profiles.problems import ProfileProblem
from governed_memory.scope import ScopeLevel

MAX_BLOCK_CHARS: Final = 50_000
"""The largest limit a block may have: every block is in every prompt."""
MAX_BLOCKS: Final = 32
DEFAULT_BLOCK_CHARS: Final = 2_000
_BLOCK_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")


def is_block_name(text: object) -> bool:
    """``persona``, ``human``, ``project_notes``: lowercase, digits and ``_``, a
    letter first, at most 64 characters (it is a tool argument and a prompt label)."""
    return isinstance(text, str) and _BLOCK_NAME.fullmatch(text) is not None


@attrs.frozen(slots=True)
class BlockSection:
    """One declared block."""

    limit: int = DEFAULT_BLOCK_CHARS
    """The most characters the block may hold; an edit past it is refused."""
    description: str = ""
    """What the block is for, shown to the agent beside it (and in the tools)."""
    initial: str = ""
    """The text a block that was never edited reads as (version 0)."""
    level: ScopeLevel = ScopeLevel.USER
    """Where the block lives: the caller's scope narrowed to this level."""

    def __attrs_post_init__(self) -> None:
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_BLOCK_CHARS:
            raise ProfileProblem("limit", f"must be between 1 and {MAX_BLOCK_CHARS} "
                                          "characters")
        if len(self.initial) > self.limit:
            raise ProfileProblem("initial", f"is {len(self.initial)} characters, over the "
                                            f"block's limit of {self.limit}")
        if "\x00" in self.initial or "\x00" in self.description:
            raise ProfileProblem("initial", "cannot hold NUL")
        if len(self.description) > 1_000:
            raise ProfileProblem("description", "is longer than 1000 characters")


def block_problems(blocks: Mapping[str, BlockSection],
                   has_store: bool) -> list[ProfileProblem]:
    """Names, count, and the store both ways round."""
    names = list(blocks)
    found = [ProfileProblem(f"blocks.{name}", "is not a block name (lowercase letters, "
                            "digits and '_', a letter first, at most 64)")
             for name in names if not is_block_name(name)]
    if len(names) > MAX_BLOCKS:
        found.append(ProfileProblem("blocks", f"declares {len(names)} blocks; at most "
                                              f"{MAX_BLOCKS}"))
    if names and not has_store:
        found.append(ProfileProblem("blocks", "declares blocks, but no block store keeps "
                                              "them ([stores.blocks] kind = \"sqlite\", "
                                              "\"postgres\" or \"memory\")"))
    if has_store and not names:
        found.append(ProfileProblem("stores.blocks", "names a block store, but the profile "
                                                     "declares no [blocks.<name>]"))
    return found
