"""Shared plumbing for CLI commands: the database location, the audit trail, scope
flags, the operator principal and output formatting.

Every command that opens memory keeps a trail of what it did: the event sinks the
profile's ``[audit]`` section names, with relative paths resolved against the CLI's
home (the directory of the database), and, when the profile names no hash-chained
trail, one at ``<home>/audit``. So an operator's commands are audited like any other
caller's, and a fail-closed profile (``compliance-strict``) works from the shell.
Several commands at once (a ``worker`` next to an ``add``) share one trail safely.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from governed_memory.converter import unstructure
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from governed_memory.events import EventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles import MemoryProfileSpec, ProfileRegistry
from governed_memory.profiles.spec import AUDIT_SINK
from governed_memory.scope import Scope
from governed_memory.sinks import build_sinks

HOME_ENV = "GOVERNED_MEMORY_HOME"
DEFAULT_PROFILE = "local@1.0.0"
DEFAULT_TRAIL = "audit"
"""The trail's directory under the CLI's home when the profile names none."""
_PROFILE_META = "governed_memory.profile"
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Exit codes by error family, so scripts can branch without parsing text.
EXIT_CODES = {
    "validation": 2,
    "scope_denied": 3,
    "policy_denied": 3,
    "not_found": 4,
    "conflict": 5,
    "capability_unsupported": 6,
    "configuration": 7,
    "storage": 8,
    "unavailable": 9,
    "audit_unavailable": 9,  # a fail-closed trail could not record the operation
    "audit_chain": 7,  # the trail on disk does not verify: nothing is chained onto it
}


def default_db_path() -> Path:
    home = os.environ.get(HOME_ENV)
    base = Path(home) if home else Path.cwd() / ".governed-memory"
    return base / "memory.db"


def home_dir(db: Path | None) -> Path:
    """Where the CLI keeps its files: the directory of ``--db`` when given, else
    ``$GOVERNED_MEMORY_HOME``, else ``./.governed-memory``."""
    return (db if db is not None else default_db_path()).absolute().parent


def _remember_profile(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    ctx.meta[_PROFILE_META] = value or DEFAULT_PROFILE


def db_option(func: F) -> F:
    """``--db`` and ``--profile``: where memory lives and which rules govern it.

    ``--profile`` is kept in the click context rather than passed to the command, so
    every data command gets it without repeating it in each signature.
    """
    func = click.option(
        "--profile", "profile", default=None, expose_value=False, is_eager=True,
        callback=_remember_profile, metavar="ID@VERSION",
        help=f"the profile that builds the manager [default: {DEFAULT_PROFILE}]",
    )(func)
    return click.option(
        "--db", "db", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help=f"SQLite database file [default: ${HOME_ENV}/memory.db, else "
             "./.governed-memory/memory.db]",
    )(func)


def scope_options(func: F) -> F:
    options = [
        click.option("--tenant", required=True, help="tenant_id (required)"),
        click.option("--workspace", default=None, help="workspace_id"),
        click.option("--project", default=None, help="project_id"),
        click.option("--user", default=None, help="user_id"),
        click.option("--session", default=None, help="session_id"),
        click.option("--run", default=None, help="run_id"),
        click.option("--agent", default=None, help="agent_id"),
        click.option("--domain-pack", default=None, help="domain_pack"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print JSON")(func)


def scope_from(kwargs: dict[str, Any]) -> Scope:
    """The scope named by the flags; a bad value is a usage error (exit 2)."""
    try:
        return Scope(
            tenant_id=kwargs.pop("tenant"), workspace_id=kwargs.pop("workspace"),
            project_id=kwargs.pop("project"), user_id=kwargs.pop("user"),
            session_id=kwargs.pop("session"), run_id=kwargs.pop("run"),
            agent_id=kwargs.pop("agent"), domain_pack=kwargs.pop("domain_pack"),
        )
    except MemoryValidationError as exc:
        flag = "--" + (exc.field or "scope").removeprefix("scope.").removesuffix("_id")
        raise click.BadParameter(str(exc), param_hint=flag.replace("_", "-")) from None


def operator(tenant_id: str) -> Principal:
    """The CLI is an operator tool run by someone with shell access to the database:
    it acts as a tenant-scoped service principal with every permission."""
    user = os.environ.get("USER") or "operator"
    return Principal(f"cli:{user}", PrincipalKind.SERVICE, tenant_id,
                     permissions=frozenset(Permission))


def current_profile() -> str:
    ctx = click.get_current_context(silent=True)
    return str(ctx.meta.get(_PROFILE_META, DEFAULT_PROFILE)) if ctx else DEFAULT_PROFILE


def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
    """A manager from the profile (``local@1.0.0`` unless ``--profile`` says otherwise)
    with the CLI's event sinks (``cli_sinks``); ``--db`` overrides the provider's
    database path."""
    plugins = PluginManager.load()
    spec = ProfileRegistry.from_plugins(plugins).get(profile or current_profile())
    overrides = None if db is None else {"path": str(db)}
    return GovernedMemoryManager.from_profile(spec, plugins=plugins,
                                              sinks=cli_sinks(spec, plugins, db),
                                              provider_config_overrides=overrides)


def cli_sinks(spec: MemoryProfileSpec, plugins: PluginManager,
              db: Path | None) -> tuple[EventSink, ...]:
    """The profile's sinks with relative paths under the CLI's home, plus the
    hash-chained trail at ``<home>/audit`` when the profile names no trail."""
    home = home_dir(db)
    sinks = build_sinks(spec, plugins, base_dir=home)
    if spec.audit.path is None:
        trail = plugins.sinks.get(AUDIT_SINK).factory({"directory": str(home / DEFAULT_TRAIL)})
        sinks = (trail, *sinks)
    return sinks


def run_with_manager(db: Path | None, work: Callable[[GovernedMemoryManager], Awaitable[T]]) -> T:
    profile = current_profile()

    async def main() -> T:
        async with open_manager(db, profile) as manager:
            return await work(manager)

    try:
        return asyncio.run(main())
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        sys.exit(EXIT_CODES.get(exc.code, 1))


def emit(value: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    if as_json:
        click.echo(json.dumps(unstructure(value), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(text(value))


def parse_metadata(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc.msg}", param_hint="--metadata") from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--metadata")
    return value

