"""Shared plumbing for CLI commands: the ``--db``/``--profile``/scope flags, content
from an argument or stdin, the operator principal, running one governed operation, and
printing its result or its error.

Every command that opens memory goes through :mod:`governed_memory.cli.building`
(the profile, the database file, the audit trail), so an operator's commands are
governed and audited like any other caller's, and a fail-closed profile
(``compliance-strict``) works from the shell. Several commands at once (a ``worker``
next to an ``add``) share one trail safely.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from governed_memory.cli.building import (
    DEFAULT_PROFILE,
    DEFAULT_TRAIL,
    HOME_ENV,
    PROFILE_ENV,
    build_manager,
    cli_sinks,
    default_db_path,
    home_dir,
)
from governed_memory.cli.context import (
    allow_creating_database,
    current_profile,
    may_create_database,
    remember_profile,
)
from governed_memory.cli.exit_codes import EXIT_CODES, exit_code
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager

__all__ = [
    "DEFAULT_PROFILE", "DEFAULT_TRAIL", "EXIT_CODES", "HOME_ENV", "PROFILE_ENV", "cli_sinks",
    "content_argument", "creates_database", "current_profile", "db_option", "default_db_path",
    "emit", "fail", "home_dir", "json_option", "open_manager", "operator", "parse_metadata",
    "read_content", "remember_profile", "run", "run_with_manager", "scope_from",
    "scope_options",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


PROFILE_HELP = ("the profile that builds the manager: a registered reference or a TOML "
                f"file [default: ${PROFILE_ENV}, else {DEFAULT_PROFILE}]")


def db_option(func: F) -> F:
    """``--db`` and ``--profile``: where memory lives and which rules govern it.

    ``--profile`` is kept in the click context rather than passed to the command, so
    every data command gets it without repeating it in each signature.
    """
    func = click.option(
        "--profile", "profile", default=None, expose_value=False, is_eager=True,
        callback=remember_profile, metavar="ID@VERSION|FILE", help=PROFILE_HELP,
    )(func)
    return click.option(
        "--db", "db", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help=f"SQLite database file [default: ${HOME_ENV}/memory.db, else "
             "./.governed-memory/memory.db]",
    )(func)


def creates_database(func: F) -> F:
    """Marks a command that may create the database (a write that can be the first).

    Every other command refuses a database that does not exist, naming it, so a
    mistyped ``--db`` or a read in the wrong directory creates nothing.
    """

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        allow_creating_database()
        return func(*args, **kwargs)

    return command  # type: ignore[return-value]


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


class Moment(click.ParamType):  # type: ignore[type-arg]
    """A point in time on the command line, as the audit commands take it
    (``governed_memory.audit.times``): ISO 8601 (``2026-03-14``,
    ``2026-03-14T09:30:00+01:00``; UTC when it names no offset), epoch seconds, or a
    time ago (``2d``, ``1h30m``, ``"3 days ago"``) counted back from now."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        import math
        import time

        from governed_memory.audit.times import parse_time

        if isinstance(value, int | float) and not isinstance(value, bool):
            if math.isfinite(value):
                return float(value)
            self.fail(f"{value!r} is not a time", param, ctx)
        try:
            return parse_time(str(value), time.time())
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


MOMENT = Moment()


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="print JSON")(func)


def content_argument(required: bool = True) -> Callable[[F], F]:
    """The memory's text as a positional argument; ``-`` reads it from stdin."""
    return click.argument("content", required=required, metavar="CONTENT" if required
                          else "[CONTENT]")


def read_content(value: str | None) -> str | None:
    """``value``, or stdin's text when it is ``-`` (a trailing newline dropped, as a
    shell pipe adds one); empty stdin is a usage error."""
    if value != "-":
        return value
    text = sys.stdin.read()
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise click.BadParameter("stdin was empty", param_hint="CONTENT")
    return text


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


def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
    """The manager of ``--profile`` over ``--db`` with the CLI's trail; a command not
    marked :func:`creates_database` refuses a database that does not exist."""
    return build_manager(profile or current_profile(), db, must_exist=not may_create_database())


def fail(exc: GovernedMemoryError) -> NoReturn:
    """Print ``error (code): message`` (and each problem of a profile that does not
    load, by its path) on stderr and exit with the family's code."""
    from governed_memory.profiles.convert import ProfileLoadError

    if isinstance(exc, ProfileLoadError):
        click.echo(f"error ({exc.code}): {exc.source}: invalid profile", err=True)
        for problem in exc.problems:
            click.echo(f"  {problem}", err=True)
    else:
        click.echo(f"error ({exc.code}): {exc}", err=True)
    sys.exit(exit_code(exc.code))


def run(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; a library error exits with its family's code."""
    try:
        return asyncio.run(work())
    except GovernedMemoryError as exc:
        fail(exc)


def run_with_manager(db: Path | None, work: Callable[[GovernedMemoryManager], Awaitable[T]]) -> T:
    """Open the profile's manager (which starts its provider), run ``work`` with it,
    close it; errors exit with the code of their family."""
    profile = current_profile()

    async def main() -> T:
        async with open_manager(db, profile) as manager:
            return await work(manager)

    return run(main)


def emit(value: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    if as_json:
        from governed_memory.converter import unstructure

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
