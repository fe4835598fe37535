"""What every group of MCP tools shares: the scope arguments, the scope a call names,
and the governed run of one call.

The server (:func:`~governed_memory_service.mcp_tools.build_mcp_server`) registers
tool groups: :class:`~governed_memory_service.mcp_tools.MemoryTools` (long-term
memories), :class:`~governed_memory_service.mcp_tier_tools.TierTools` (turns,
working state, the per-turn context) and
:class:`~governed_memory_service.mcp_audit_tools.AuditTools` (an auditor's reads of the
trail). A group is a :class:`ToolGroup` whose ``tools()``
name its tools (each one a method of the same name) with their title, description and
hints; its methods run through :meth:`ToolGroup._governed`, so every tool acts as the
principal its transport supplies, and a library refusal becomes the same tool error
(the REST problem document, :func:`~governed_memory_service.mcp_output.error_result`)
whatever group the tool is in. The groups live in modules of their own and import this
one, never each other; :mod:`mcp_tools` puts them together in one server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from governed_memory import Principal, Scope
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from governed_memory_service.mcp_output import error_result, internal_error_result

__all__ = [
    "READ_ONLY",
    "ROLES",
    "Agent",
    "DomainPack",
    "PrincipalSource",
    "Project",
    "RoleName",
    "Run",
    "Session",
    "Shared",
    "ToolGroup",
    "ToolSpec",
    "User",
    "Workspace",
    "epoch",
    "tool_scope",
    "write_hints",
]

logger = logging.getLogger("governed_memory_service.mcp")

PrincipalSource = Callable[[Context[Any, Any]], Principal]
"""The principal of one tool call, from its transport; raises
:class:`~governed_memory_service.errors.AuthenticationError` when there is none."""

ToolSpec = tuple[str, str, ToolAnnotations]
"""A tool's title, its description (written for the model that picks tools) and its
hints."""

RoleName = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[str, ...] = get_args(RoleName)
"""Spelled out so a tool's schema enumerates them (a turn's role, a conversation
message's); a test keeps them equal to ``governed_memory.tiers.Role``."""


def write_hints(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """What a client may assume of a tool that writes: never read-only, never open-world."""
    return ToolAnnotations(read_only_hint=False, destructive_hint=destructive,
                           idempotent_hint=idempotent, open_world_hint=False)


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                            idempotent_hint=True, open_world_hint=False)

_SCOPE = ("Leave unset unless the user or task names one; an unset dimension is absent "
          "(the scope is exact, not a prefix).")
Workspace = Annotated[str | None, Field(description=f"Workspace of the memory. {_SCOPE}")]
Project = Annotated[str | None, Field(description=f"Project of the memory. {_SCOPE}")]
User = Annotated[str | None, Field(
    description="User the memory belongs to; defaults to the authenticated user. Another "
                "user's memories are refused unless your credentials allow them.")]
Session = Annotated[str | None, Field(description=f"Conversation session. {_SCOPE}")]
Run = Annotated[str | None, Field(description=f"Agent run. {_SCOPE}")]
Agent = Annotated[str | None, Field(description=f"Agent the memory belongs to. {_SCOPE}")]
DomainPack = Annotated[str | None, Field(description=f"Domain pack. {_SCOPE}")]
Shared = Annotated[bool, Field(
    description="true: the memories shared by everyone in the project or workspace (the "
                "scope without a user) instead of the authenticated user's; leave "
                "`user_id` unset with it.")]


class ToolGroup:
    """Tools over one service object, acting as ``principal_of`` says."""

    def __init__(self, principal_of: PrincipalSource) -> None:
        self._principal_of = principal_of

    def tools(self) -> Mapping[str, ToolSpec]:
        """The tools this group serves, by name: each is the method of that name,
        whose parameters (but ``ctx``, the call's context) are the tool's arguments."""
        raise NotImplementedError

    async def _governed(self, tool: str, ctx: Context[Any, Any],
                        run: Callable[[Principal], Awaitable[CallToolResult]]) -> CallToolResult:
        """``run`` as the call's principal; a library error is the tool error carrying
        its problem document, anything else an ``internal`` one (logged by type)."""
        try:
            return await run(self._principal_of(ctx))
        except GovernedMemoryError as error:
            return error_result(error)
        except Exception as exc:
            # The type only, as the REST routes log it: a message might quote the call.
            logger.error("MCP tool %s failed unexpectedly: %s", tool, type(exc).__name__)
            return internal_error_result()


def epoch(moment: datetime | None) -> float | None:
    """A tool's date-time as the library's epoch seconds (naive ones are UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def tool_scope(principal: Principal, workspace_id: str | None, project_id: str | None,
               user_id: str | None, session_id: str | None, run_id: str | None,
               agent_id: str | None, domain_pack: str | None, shared: bool = False) -> Scope:
    """The scope a call names: always the principal's tenant (an agent cannot even
    spell another one), the principal's user unless another is named or ``shared`` asks
    for the scope without a user (as REST's ``shared=true``)."""
    if shared and user_id is not None:
        raise MemoryValidationError("shared names the scope without a user: give shared "
                                    "or user_id, not both", field="arguments.shared")
    owner = None if shared else (user_id if user_id is not None else principal.user_id)
    return Scope(principal.tenant_id, workspace_id=workspace_id, project_id=project_id,
                 user_id=owner,
                 session_id=session_id, run_id=run_id, agent_id=agent_id,
                 domain_pack=domain_pack)
