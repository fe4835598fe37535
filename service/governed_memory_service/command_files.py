"""The files the service commands create, and the one option that names the key store.

``serve``, ``mcp`` and ``keys create`` create the files they work on (the memory
database, the key store, a tier's SQLite file), but only where a directory already
is, unless it is the CLI's default home (``$GOVERNED_MEMORY_HOME``, else
``./.governed-memory``), which they create as ``governed-memory add`` does: a path
given explicitly (an option or the profile) in a directory that does not exist is far
more often a typo than a wish, and creating it would start an empty store whose writes
nobody ever finds. Such a path is refused before anything is built, naming it, with the
CLI's ``not_found`` exit code (4).

Every command that uses the key store names it ``--keys`` (a file, a ``postgresql://``
URI or ``profile``: :mod:`governed_memory_service.key_stores`); ``--keys-db``, the
spelling the ``keys`` commands had, still works, hidden and deprecated, so existing
scripts keep running.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
from governed_memory.errors import MemoryNotFoundError

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager

__all__ = ["KEYS_HELP", "creatable", "default_home", "keys_option", "profile_files"]

F = TypeVar("F", bound=Callable[..., Any])

KEYS_HELP: Final = ("the API key store: a SQLite file, a postgresql:// URI (?schema= "
                    "names its schema, default governed_memory_keys) or `profile` (the "
                    "profile's PostgreSQL database); default $GOVERNED_MEMORY_KEYS, else "
                    "$GOVERNED_MEMORY_HOME/keys.db, else ./.governed-memory/keys.db")
_IN_MEMORY: Final = frozenset({"", ":memory:"})


def default_home() -> Path:
    """The CLI's home: ``$GOVERNED_MEMORY_HOME``, else ``./.governed-memory``."""
    from governed_memory.cli.building import default_db_path

    return default_db_path().absolute().parent


def creatable(paths: Iterable[tuple[str, Path]]) -> None:
    """Refuse the first ``(what, path)`` whose directory does not exist, unless that
    directory is the default home (created on first use)."""
    home = default_home()
    for what, path in paths:
        parent = path.absolute().parent
        if parent == home or parent.is_dir():
            continue
        raise MemoryNotFoundError(
            f"{what} {path.absolute()} is in a directory that does not exist ({parent}); "
            "create it first, or name a file in an existing directory (only the default "
            f"home, {home}, is created on first use)")


def profile_files(profile: str, db: Path | None,
                  plugins: PluginManager) -> list[tuple[str, Path]]:
    """The SQLite files a manager (and the tiers) built from ``profile`` over ``db``
    would open: the memory database and each ``[stores.*]`` file the profile names."""
    from governed_memory.cli.building import database_file
    from governed_memory.profiles import resolve_profile

    spec = resolve_profile(profile, plugins)
    files: list[tuple[str, Path]] = []
    database = database_file(spec, db)
    if database is not None:
        files.append(("the memory database", database))
    for name, store in spec.stores.items():
        path = store.config.get("path")
        if isinstance(path, str) and path not in _IN_MEMORY:
            files.append((f"the [stores.{name}] file", Path(path)))
    return files


def keys_option(command: F) -> F:
    """``--keys FILE|URI|profile`` (and the hidden, deprecated ``--keys-db PATH``) as the
    command's ``keys`` argument, a string or ``None``. Put it directly above the
    ``def``."""

    @functools.wraps(command)
    def merged(*args: Any, keys: str | None, keys_db: str | None, **kwargs: Any) -> Any:
        if keys_db is not None:
            if keys is not None:
                raise click.UsageError("--keys and --keys-db name the same store: give "
                                       "--keys only")
            click.echo("warning: --keys-db is deprecated; use --keys", err=True)
            keys = keys_db
        return command(*args, keys=keys, **kwargs)

    merged = click.option("--keys-db", "keys_db", type=str, default=None, hidden=True,
                          help="deprecated spelling of --keys")(merged)
    merged = click.option("--keys", "keys", type=str, default=None,
                          metavar="FILE|URI|profile", help=KEYS_HELP)(merged)
    return merged  # type: ignore[return-value]
