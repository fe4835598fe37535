"""The tier calls the REST routes and the MCP tools both make, written once.

Both surfaces reach the conversation and working-state tiers and the per-turn context
through one ``MemoryTiers`` and one ``MemoryContextBuilder`` over the service's manager,
so each call is governed like a memory operation, as the caller's principal. What is
the service's own choice lives here, so REST and MCP cannot drift apart: a tier the
profile does not declare is the library's capability error (REST's ``501``, MCP's
``capability_unsupported`` tool error), never an empty answer that would look like no
data; reading turns is the newest window, or the page after a sequence number; and the
tiers and builder a server uses are the ones over its manager.
"""

from __future__ import annotations

from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.errors import MemoryCapabilityUnsupportedError, MemoryValidationError
from governed_memory.remembering import MODEL_SETTING
from governed_memory.tiers import Block, MemoryBlocks, MemoryTiers, Turn
from governed_memory.turncontext import MemoryContextBuilder

__all__ = ["AFTER_PAGE", "EDIT_FIELDS", "blocks", "context_over", "conversation", "edit_block",
           "read_turns", "remembering", "working"]

AFTER_PAGE = 50
"""How many turns a read after a sequence number returns when it names no limit."""


def conversation(tiers: MemoryTiers) -> MemoryTiers:
    """``tiers``, when they have a conversation tier."""
    if not tiers.has_turns:
        raise MemoryCapabilityUnsupportedError(
            "this server has no conversation tier (the profile declares no "
            "[stores.turns])")
    return tiers


def working(tiers: MemoryTiers) -> MemoryTiers:
    """``tiers``, when they have a working-state tier."""
    if not tiers.has_working:
        raise MemoryCapabilityUnsupportedError(
            "this server has no working-state tier (the profile declares no "
            "[stores.working_state])")
    return tiers


def blocks(tiers: MemoryTiers) -> MemoryBlocks:
    """The tiers' memory blocks, when the profile declares any."""
    if not tiers.has_blocks:
        raise MemoryCapabilityUnsupportedError(
            "this server has no memory blocks (the profile declares no [stores.blocks] "
            "and [blocks.<name>])")
    return tiers.blocks


EDIT_FIELDS = {"replace": ("old", "new"), "append": ("text",), "rethink": ("value",)}
"""The fields each edit verb takes, and only those."""


async def edit_block(tiers: MemoryTiers, principal: Principal, scope: Scope, name: str,
                     edit: str, fields: dict[str, str | None],
                     expected_version: int | None) -> Block:
    """One edit as a REST body or a CLI command spells it: the verb and its fields,
    a missing one or one of another verb refused by name."""
    wanted = EDIT_FIELDS.get(edit)
    if wanted is None:
        raise MemoryValidationError("edit must be replace, append or rethink", field="edit")
    for field, given in fields.items():
        if given is None and field in wanted:
            raise MemoryValidationError(f"{edit} needs {field}", field=field)
        if given is not None and field not in wanted:
            raise MemoryValidationError(f"{edit} takes no {field} (it takes "
                                        f"{' and '.join(wanted)})", field=field)
    memory = blocks(tiers)
    if edit == "replace":
        return await memory.replace(principal, scope, name, str(fields["old"]),
                                    str(fields["new"]), expected_version=expected_version)
    if edit == "append":
        return await memory.append(principal, scope, name, str(fields["text"]),
                                   expected_version=expected_version)
    return await memory.rethink(principal, scope, name, str(fields["value"]),
                                expected_version=expected_version)


def remembering(manager: GovernedMemoryManager) -> GovernedMemoryManager:
    """``manager``, when it has the language model ``remember`` reads with: a server
    without one answers REST and MCP alike (capability unsupported, naming the
    setting), not with a server fault."""
    if manager.language_model is None:
        raise MemoryCapabilityUnsupportedError(
            f"this server has no language model (the profile declares no {MODEL_SETTING})")
    return manager


async def read_turns(tiers: MemoryTiers, principal: Principal, scope: Scope, *,
                     limit: int | None, after_seq: int | None) -> tuple[Turn, ...]:
    """The session's newest turns (``limit``, else the tiers' recent limit), oldest
    first; with ``after_seq``, up to ``limit`` (else :data:`AFTER_PAGE`) turns after
    that sequence number."""
    if after_seq is None:
        return await conversation(tiers).recent(principal, scope, limit=limit)
    return await conversation(tiers).turns_after(
        principal, scope, after_seq, limit=AFTER_PAGE if limit is None else limit)


def context_over(manager: GovernedMemoryManager, tiers: MemoryTiers | None,
                 builder: MemoryContextBuilder | None,
                 ) -> tuple[MemoryTiers, MemoryContextBuilder]:
    """The tiers and the context builder a server over ``manager`` uses: the ones
    given, checked to be over ``manager`` (a ``ValueError`` otherwise); ``tiers``
    default to the ones the manager's profile declares (``MemoryTiers.from_manager``:
    their stores are the caller's to start), ``builder`` to one over the tiers with the
    profile's ``[context]`` budgets and no language model."""
    if tiers is None:
        tiers = builder.tiers if builder is not None else MemoryTiers.from_manager(manager)
    if tiers.long_term_or_none is not manager:
        raise ValueError("the tiers' long-term tier must be the app's manager")
    if builder is None:
        builder = MemoryContextBuilder(tiers)
    elif builder.tiers is not tiers:
        raise ValueError("the context builder must build over the app's tiers")
    return tiers, builder
