"""``governed-memory keys create|list|revoke`` (through the ``service`` plugin's
``register_cli_commands``) and the same commands, with ``serve`` and ``mcp``, as
``python -m governed_memory_service``.

The framework never imports the service: it finds these commands through the hook.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import click
from governed_memory import Permission, PrincipalKind
from governed_memory.cli.exit_codes import EXIT_CODES
from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError, MemoryValidationError

from governed_memory_service.api_keys import KeyStore
from governed_memory_service.command_files import creatable, keys_option
from governed_memory_service.key_stores import KeyStoreLocation, key_store_location
from governed_memory_service.mcp_stdio import mcp
from governed_memory_service.serve_command import serve

__all__ = ["main"]

T = TypeVar("T")


@click.group()
def main() -> None:
    """The governed memory service."""


@main.group()
def keys() -> None:
    """API keys: create (the secret is printed once), list, revoke."""


_PROFILE_HELP = ("the profile whose PostgreSQL database `--keys profile` names (default "
                 "$GOVERNED_MEMORY_PROFILE); unused otherwise")


def _profile_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option("--profile", default=None, envvar="GOVERNED_MEMORY_PROFILE",
                        metavar="ID@VERSION|FILE", help=_PROFILE_HELP)(command)


@keys.command("create")
@click.option("--tenant", required=True)
@click.option("--kind", type=click.Choice([k.value for k in PrincipalKind]), default="user")
@click.option("--user", "user_id", default=None, help="bind the key to this user")
@click.option("--principal", "principal_id", default=None)
@click.option("--permission", "permissions", multiple=True, required=True,
              type=click.Choice([p.value for p in Permission]))
@click.option("--label", default=None)
@_profile_option
@keys_option
def create(keys: str | None, profile: str | None, tenant: str, kind: str,
           user_id: str | None, principal_id: str | None, permissions: tuple[str, ...],
           label: str | None) -> None:
    """Create a key; its secret is printed once and cannot be shown again. Creates the
    key store if there is none (a file: and the default home, but no other directory;
    PostgreSQL: its schema and table)."""
    location = _location(keys, profile)
    if location.path is not None:
        try:
            creatable([("the key store", location.path)])
        except GovernedMemoryError as exc:
            _fail(exc)

    async def run(store: KeyStore) -> str:
        await store.open()
        issued = await store.create(tenant_id=tenant, kind=kind, user_id=user_id,
                                    principal_id=principal_id, permissions=permissions,
                                    label=label)
        return json.dumps({"key_id": issued.key.key_id, "token": issued.token,
                           "principal_id": issued.key.principal_id})

    try:
        click.echo(_with_store(location, run, must_exist=False))
    except MemoryValidationError as exc:
        raise click.UsageError(f"{exc.field}: {exc}") from None
    click.echo("store the token now: only its hash is kept", err=True)


def _fail(error: GovernedMemoryError) -> NoReturn:
    """Exit as the CLI's data commands do: the code and message, the code's exit status."""
    click.echo(f"error ({error.code}): {error}", err=True)
    sys.exit(EXIT_CODES.get(error.code, 1))


def _location(keys: str | None, profile: str | None) -> KeyStoreLocation:
    try:
        return key_store_location(keys, profile=profile)
    except GovernedMemoryError as exc:
        _fail(exc)


def _with_store(location: KeyStoreLocation, work: Callable[[KeyStore], Awaitable[T]], *,
                must_exist: bool) -> T:
    """``work`` on the store ``location`` names, closed afterwards. ``must_exist``: a
    store that is not there is an error naming it (exit 4), never a new empty one; a
    read or a revocation acts on an existing store only."""

    async def run() -> T:
        store = location.store()
        try:
            if must_exist and not await store.exists():
                where = (location.path if location.path is not None
                         else location.describe().removeprefix("the PostgreSQL key store "))
                raise MemoryNotFoundError(
                    f"no key store at {where} (`governed-memory keys create` makes one; "
                    "--keys names another)")
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except MemoryValidationError:
        raise
    except GovernedMemoryError as exc:
        _fail(exc)


@keys.command("list")
@click.option("--tenant", default=None)
@_profile_option
@keys_option
def list_keys(keys: str | None, profile: str | None, tenant: str | None) -> None:
    """Every key's id and bindings (never a secret), one JSON object a line."""

    async def run(store: KeyStore) -> list[str]:
        found = await store.list(tenant_id=tenant)
        return [json.dumps({"key_id": k.key_id, "principal_id": k.principal_id,
                            "kind": k.kind.value, "tenant_id": k.tenant_id,
                            "user_id": k.user_id,
                            "permissions": [p.value for p in k.permissions],
                            "label": k.label, "created_at": k.created_at,
                            "revoked_at": k.revoked_at}) for k in found]

    for line in _with_store(_location(keys, profile), run, must_exist=True):
        click.echo(line)


@keys.command("revoke")
@click.argument("key_id")
@_profile_option
@keys_option
def revoke(keys: str | None, profile: str | None, key_id: str) -> None:
    """Revoke a key: at once for the processes that read a SQLite store, within a
    second for every process and node on a PostgreSQL store."""

    async def run(store: KeyStore) -> bool:
        return await store.revoke(key_id)

    if not _with_store(_location(keys, profile), run, must_exist=True):
        raise click.ClickException(f"no active key {key_id}")
    click.echo(f"revoked {key_id}")


main.add_command(serve)
main.add_command(mcp)
