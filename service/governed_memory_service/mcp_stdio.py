"""``governed-memory mcp``: the MCP server over stdio, for a desktop agent.

A desktop agent (Claude Desktop, an IDE) launches the server as a local process and
speaks MCP over its stdin and stdout, so there is no request to authenticate: whoever
configured the command chose its principal, and every tool call acts as that one
principal (``--tenant``, ``--user``, ``--permission``), under the same governance as
any other (scope rule, policies, audit trail). The manager is built from the profile as
``governed-memory serve`` builds it.

stdout carries only protocol messages: logs go to stderr, and the SDK's stdio transport
claims the process's stdout for itself while it runs.

The ``mcp`` SDK and the service modules are imported inside the command only, so
loading plugins never needs the extra.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import click
from governed_memory import Permission, Principal, PrincipalKind
from governed_memory.cli.common import EXIT_CODES
from governed_memory.errors import GovernedMemoryError, MemoryValidationError

from governed_memory_service.serve import build_manager, require_service_extra

__all__ = ["mcp"]

DEFAULT_PERMISSIONS = (Permission.READ, Permission.WRITE, Permission.DELETE)


async def _run(profile: str, db: Path | None, principal: Principal) -> None:
    from governed_memory.tiers import MemoryTiers

    from governed_memory_service.mcp_tools import build_mcp_server

    manager = build_manager(profile, db)
    # The tiers the profile declares; entering them starts the manager and their stores.
    tiers = MemoryTiers.from_manager(manager)
    server = build_mcp_server(manager, lambda ctx: principal, tiers=tiers)
    async with tiers:
        await server.run_stdio_async()


@click.command("mcp")
@click.option("--profile", required=True, metavar="ID@VERSION|FILE",
              help="the profile that builds the manager: a registered reference or a "
                   "TOML file")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite database file (overrides the profile provider's path)")
@click.option("--tenant", required=True, help="the principal's tenant")
@click.option("--user", "user_id", required=True, help="the principal's user")
@click.option("--principal", "principal_id", default=None,
              help="the principal's id in the audit trail (default user:<user>)")
@click.option("--permission", "permissions", multiple=True,
              type=click.Choice([p.value for p in Permission]),
              help="repeatable (default: memory:read, memory:write, memory:delete)")
def mcp(profile: str, db: Path | None, tenant: str, user_id: str, principal_id: str | None,
        permissions: tuple[str, ...]) -> None:
    """Serve MCP over stdio as one configured principal (for a desktop agent)."""
    require_service_extra()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        principal = Principal(principal_id or f"user:{user_id}", PrincipalKind.USER,
                              tenant, user_id,
                              frozenset(map(Permission, permissions or DEFAULT_PERMISSIONS)))
    except MemoryValidationError as exc:
        raise click.UsageError(f"{exc.field}: {exc}") from None
    try:
        asyncio.run(_run(profile, db, principal))
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        sys.exit(EXIT_CODES.get(exc.code, 1))
    except KeyboardInterrupt:
        pass
