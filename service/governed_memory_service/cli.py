"""``governed-memory keys create|list|revoke`` (through the ``service`` plugin's
``register_cli_commands``) and the same commands, with ``serve`` and ``mcp``, as
``python -m governed_memory_service``.

The framework never imports the service: it finds these commands through the hook.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import NoReturn

import click
from governed_memory import Permission, PrincipalKind
from governed_memory.cli.exit_codes import EXIT_CODES
from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError, MemoryValidationError

from governed_memory_service.api_keys import ApiKeyStore, default_key_store_path
from governed_memory_service.command_files import creatable, keys_option
from governed_memory_service.mcp_stdio import mcp
from governed_memory_service.serve import serve

__all__ = ["main"]


@click.group()
def main() -> None:
    """The governed memory service."""


@main.group()
def keys() -> None:
    """API keys: create (the secret is printed once), list, revoke."""


@keys.command("create")
@click.option("--tenant", required=True)
@click.option("--kind", type=click.Choice([k.value for k in PrincipalKind]), default="user")
@click.option("--user", "user_id", default=None, help="bind the key to this user")
@click.option("--principal", "principal_id", default=None)
@click.option("--permission", "permissions", multiple=True, required=True,
              type=click.Choice([p.value for p in Permission]))
@click.option("--label", default=None)
@keys_option
def create(keys: Path | None, tenant: str, kind: str, user_id: str | None,
           principal_id: str | None, permissions: tuple[str, ...], label: str | None) -> None:
    """Create a key; its secret is printed once and cannot be shown again. Creates the
    key store if there is none (and the default home, but no other directory)."""
    path = keys or default_key_store_path()
    try:
        creatable([("the key store", path)])
    except GovernedMemoryError as exc:
        _fail(exc)

    async def run() -> str:
        async with ApiKeyStore(path) as store:
            issued = await store.create(tenant_id=tenant, kind=kind, user_id=user_id,
                                        principal_id=principal_id, permissions=permissions,
                                        label=label)
        return json.dumps({"key_id": issued.key.key_id, "token": issued.token,
                           "principal_id": issued.key.principal_id})

    try:
        click.echo(asyncio.run(run()))
    except MemoryValidationError as exc:
        raise click.UsageError(f"{exc.field}: {exc}") from None
    click.echo("store the token now: only its hash is kept", err=True)


def _fail(error: GovernedMemoryError) -> NoReturn:
    """Exit as the CLI's data commands do: the code and message, the code's exit status."""
    click.echo(f"error ({error.code}): {error}", err=True)
    sys.exit(EXIT_CODES.get(error.code, 1))


def _existing_store(keys: Path | None) -> Path:
    """The key store a read or a revocation acts on; a missing one is an error naming
    the path (exit 4, as for a data command's missing database), never a new empty
    store in the working directory."""
    path = keys or default_key_store_path()
    if not path.is_file():
        _fail(MemoryNotFoundError(f"no key store at {path} (`governed-memory keys create` "
                                  "makes one; --keys names another)"))
    return path


@keys.command("list")
@click.option("--tenant", default=None)
@keys_option
def list_keys(keys: Path | None, tenant: str | None) -> None:
    """Every key's id and bindings (never a secret), one JSON object a line."""

    path = _existing_store(keys)

    async def run() -> list[str]:
        async with ApiKeyStore(path) as store:
            found = await store.list(tenant_id=tenant)
        return [json.dumps({"key_id": k.key_id, "principal_id": k.principal_id,
                            "kind": k.kind.value, "tenant_id": k.tenant_id,
                            "user_id": k.user_id,
                            "permissions": [p.value for p in k.permissions],
                            "label": k.label, "created_at": k.created_at,
                            "revoked_at": k.revoked_at}) for k in found]

    for line in asyncio.run(run()):
        click.echo(line)


@keys.command("revoke")
@click.argument("key_id")
@keys_option
def revoke(keys: Path | None, key_id: str) -> None:
    """Revoke a key at once."""

    path = _existing_store(keys)

    async def run() -> bool:
        async with ApiKeyStore(path) as store:
            return await store.revoke(key_id)

    if not asyncio.run(run()):
        raise click.ClickException(f"no active key {key_id}")
    click.echo(f"revoked {key_id}")


main.add_command(serve)
main.add_command(mcp)
