"""How a command gets its manager: which profile, which database file, which trail.

One implementation for every command that opens memory: the data commands, the
indexing commands, the demo and, through the service plugin, ``serve`` and ``mcp``.

- ``--profile`` is a TOML file (when a file exists at that path) or a registered
  ``id@version`` reference, resolved by the framework's one rule
  (:func:`governed_memory.profiles.resolve_profile`, which ``from_profile`` uses too),
  so a team's own profile (PostgreSQL, the Redis cache, an embedder) needs no plugin
  package, and a name that is neither is refused naming both possibilities.
- The database is a SQLite file: ``--db``, else the ``path`` the profile's provider
  config names, else, for the native provider on SQLite, ``$GOVERNED_MEMORY_HOME/
  memory.db`` or ``./.governed-memory/memory.db``. A provider that keeps its data
  elsewhere (PostgreSQL, Mem0) has no file, and ``--db`` is passed to it as ``path``
  for it to accept or refuse.
- A command that does not create the database (every one but ``add``, ``worker``,
  ``demo`` and the servers) refuses a file that does not exist, naming it, before
  anything is built: a mistyped ``--db`` or a read in the wrong directory creates no
  directory, no database and no trail.
- Every manager keeps the trail the profile's ``[audit]`` names, relative paths
  resolved against the CLI's home (the database's directory; the built-in profiles
  name ``audit``), and, when the profile names no hash-chained trail, one at
  ``<home>/audit``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from governed_memory.events import EventSink
    from governed_memory.manager import GovernedMemoryManager
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import MemoryProfileSpec, ProfileSource

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
PROFILE_ENV: Final = "GOVERNED_MEMORY_PROFILE"
DEFAULT_PROFILE: Final = "local@1.0.0"
DEFAULT_TRAIL: Final = "audit"
"""The trail's directory under the CLI's home when the profile names none."""
_IN_MEMORY: Final = frozenset({"", ":memory:"})


def default_db_path() -> Path:
    """``$GOVERNED_MEMORY_HOME/memory.db``, else ``./.governed-memory/memory.db``."""
    home = os.environ.get(HOME_ENV)
    base = Path(home) if home else Path.cwd() / ".governed-memory"
    return base / "memory.db"


def home_dir(db: Path | None) -> Path:
    """Where the CLI keeps its files: the directory of the database when there is one,
    else ``$GOVERNED_MEMORY_HOME``, else ``./.governed-memory``."""
    return (db if db is not None else default_db_path()).absolute().parent


def database_file(spec: MemoryProfileSpec, db: Path | None) -> Path | None:
    """The SQLite file the command works on, or ``None`` when the profile's provider
    keeps its data elsewhere (a server, process memory)."""
    if db is not None:
        return db
    config = spec.provider.config
    path = config.get("path")
    if isinstance(path, str) and path not in _IN_MEMORY:
        return Path(path)
    if spec.provider.name == "native" and config.get("backend", "sqlite") == "sqlite":
        return default_db_path()
    return None


def require_database(path: Path | None) -> None:
    """Refuse a database file that does not exist (``not_found``, exit 4)."""
    from governed_memory.errors import MemoryNotFoundError

    if path is not None and not path.is_file():
        where = path.absolute()
        hint = ("a write such as `governed-memory add` creates it"
                if where.parent.is_dir() else f"its directory {where.parent} does not exist "
                                              "either")
        raise MemoryNotFoundError(
            f"no database at {where} ({hint}; --db or ${HOME_ENV} picks another)")


def cli_sinks(spec: MemoryProfileSpec, plugins: PluginManager,
              db: Path | None) -> tuple[EventSink, ...]:
    """The profile's sinks with relative paths under the CLI's home, plus the
    hash-chained trail at ``<home>/audit`` when the profile names no trail (neither
    ``path`` nor a sink that keeps one in a store, such as ``postgres-trail``)."""
    from governed_memory.audit.stored import TrailStore
    from governed_memory.profiles.spec import AUDIT_SINK
    from governed_memory.sinks import build_sinks

    home = home_dir(db)
    sinks = build_sinks(spec, plugins, base_dir=home)
    if spec.audit.path is None and not any(isinstance(sink, TrailStore) for sink in sinks):
        trail = plugins.sinks.get(AUDIT_SINK).factory({"directory": str(home / DEFAULT_TRAIL)})
        sinks = (trail, *sinks)
    return sinks


def build_manager(profile: ProfileSource, db: Path | None, *, must_exist: bool = False,
                  plugins: PluginManager | None = None,
                  extra_sinks: tuple[EventSink, ...] = (),
                  maintenance_interval_s: float | None = None) -> GovernedMemoryManager:
    """The manager ``profile`` builds, over ``db`` (or the profile's own database),
    with the CLI's trail; unstarted (``async with`` starts it).

    ``must_exist``: refuse a database file that does not exist yet (see the module
    docstring) instead of letting the provider create it. ``maintenance_interval_s``:
    the manager runs its maintenance round at that period while started (the server's
    ``--maintain-every``); ``None``, never.
    """
    from governed_memory.manager import GovernedMemoryManager
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles.resolve import resolve_profile

    plugins = plugins if plugins is not None else PluginManager.load()
    spec = resolve_profile(profile, plugins)
    file = database_file(spec, db)
    if must_exist:
        require_database(file)
    overrides = None if file is None or (db is None and "path" in spec.provider.config) \
        else {"path": str(file)}
    return GovernedMemoryManager.from_profile(
        spec, plugins=plugins, sinks=(*cli_sinks(spec, plugins, file), *extra_sinks),
        provider_config_overrides=overrides, maintenance_interval_s=maintenance_interval_s)
