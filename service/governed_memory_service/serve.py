"""What ``governed-memory serve`` runs: the HTTP API under uvicorn, with a graceful
SIGTERM (the command itself is :mod:`governed_memory_service.serve_command`).

The manager comes from a profile the way the data commands build theirs (the same
``--db`` override and the same audit trail under the database's directory), so what a
served request does is what ``governed-memory add`` would have done. The app owns the
manager's lifespan: uvicorn's shutdown stops accepting, lets requests in flight finish
(at most ``--shutdown-timeout`` seconds), and only then runs the lifespan shutdown that
closes the manager; an acknowledged write was committed before its response was sent,
so none is lost. uvicorn re-raises the captured signal once it is done, which would
turn a clean stop into death by SIGTERM; the command keeps its own handler installed so
that a requested stop exits 0.

``--workers N`` (N > 1) runs that same server in N worker processes over one listening
socket, under a supervising parent: :mod:`governed_memory_service.workers`, which builds
on this module. One worker (the default) is exactly the single process described above.

Starlette, uvicorn and PyJWT (the ``service`` extra) are imported inside the functions
that serve only, so loading plugins never needs them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Final, Literal

import attrs
import click

EXTRA_HINT = "pip install 'governed-memory[service]'"
_EXTRA_MODULES = ("starlette", "uvicorn", "jwt", "httpx", "mcp")
ListenMode = Literal["shared", "reuseport"]
LISTEN_MODES: Final = ("reuseport", "shared")
DEFAULT_LISTEN_MODE: Final[ListenMode] = ("reuseport" if sys.platform.startswith("linux")
                                          else "shared")
"""Linux spreads connections over ``SO_REUSEPORT`` sockets; elsewhere (macOS, the BSDs)
the option only lets sockets share a port, without spreading, so one socket is shared."""
DEFAULT_MAX_RESTARTS: Final = 5
DEFAULT_RESTART_WINDOW_S: Final = 60
DEFAULT_MAINTAIN_EVERY_S: Final = 300.0
"""How often a served manager runs its maintenance round (snapshots past retention,
expired records of every scope), so a deployment minimises data without a separate
worker; ``--maintain-every 0`` leaves it to ``governed-memory worker``."""


@attrs.frozen(kw_only=True)
class ServeOptions:
    profile: str
    db: Path | None
    keys: str | None
    host: str
    port: int
    shutdown_timeout: int
    access_log: bool = False
    workers: int = 1
    listen_mode: ListenMode = DEFAULT_LISTEN_MODE
    max_restarts: int = DEFAULT_MAX_RESTARTS
    restart_window_s: int = DEFAULT_RESTART_WINDOW_S
    maintain_every_s: float = DEFAULT_MAINTAIN_EVERY_S
    """Seconds between the manager's maintenance rounds; 0: none in the server."""

    def to_json(self) -> str:
        """For a worker process (its stdin, never its argv: ``keys`` may hold a
        password)."""
        values = attrs.asdict(self)
        values["db"] = None if self.db is None else str(self.db)
        return json.dumps(values)

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        values = json.loads(text)
        values["db"] = None if values["db"] is None else Path(values["db"])
        return cls(**values)


def require_service_extra() -> None:
    """Exit non-zero naming the extra when one of its libraries is missing."""
    import importlib

    command = click.get_current_context(silent=True)
    name = command.info_name if command is not None and command.info_name else "serve"
    for module in _EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            click.echo(f"error (configuration): `governed-memory {name}` needs the service "
                       f"extra ({module} is not installed): {EXTRA_HINT}", err=True)
            sys.exit(7)


def build_manager(profile: str, db: Path | None, *,
                  also_creates: tuple[tuple[str, Path], ...] = (),
                  maintain_every_s: float = 0.0) -> Any:
    """The manager ``profile`` builds: a registered ``id@version`` or a TOML file, over
    ``db``, with the CLI's audit trail. The CLI's own construction
    (:func:`governed_memory.cli.building.build_manager`), so a served request does what
    ``governed-memory add`` would. With ``maintain_every_s`` the manager runs its
    maintenance round at that period while it is started (every worker process does:
    the round is safe with several at once).

    A server may create its database and the ``[stores.*]`` files the profile names,
    and ``also_creates`` (the key store), but only in a directory that exists or the
    default home (:func:`~governed_memory_service.command_files.creatable`): checked
    here, before anything is built, so a refusal leaves nothing behind.
    """
    from governed_memory.cli.building import build_manager as build
    from governed_memory.plugins import PluginManager

    from governed_memory_service.command_files import creatable, profile_files

    plugins = PluginManager.load()
    creatable([*profile_files(profile, db, plugins), *also_creates])
    return build(profile, db, plugins=plugins,
                 maintenance_interval_s=maintain_every_s if maintain_every_s > 0 else None)


def authenticating_jwt(manager: Any) -> Any:
    """The JWT verifier the manager's profile declares (``[auth.jwt]``), or ``None``;
    its key is read here, so a missing one stops the server before it listens."""
    from governed_memory_service.jwt_bearer import JwtSettings, JwtVerifier

    spec = manager.profile_spec
    if spec is None or spec.auth.jwt is None:
        return None
    return JwtVerifier(JwtSettings.from_profile(spec.auth.jwt))


def server_parts(options: ServeOptions) -> tuple[Any, Any, Any]:
    """The manager, the key store (unopened) and the JWT verifier (or ``None``) the
    options name, checked before anything listens: a key file only where it may be
    created, PostgreSQL keys never in the memory schema, the JWT key readable."""
    from governed_memory_service.key_stores import key_store_location, refuse_memory_schema

    location = key_store_location(options.keys, profile=options.profile)
    creates = () if location.path is None else (("the key store", location.path),)
    manager = build_manager(options.profile, options.db, also_creates=creates,
                            maintain_every_s=options.maintain_every_s)
    refuse_memory_schema(location, manager.profile_spec)
    return manager, location.store(), authenticating_jwt(manager)


StartedHook = Callable[[], None]


async def serve_app(options: ServeOptions, *, sockets: list[socket.socket] | None = None,
                    on_started: StartedHook | None = None,
                    parent_fd: int | None = None,
                    stopped_early: Callable[[], bool] | None = None) -> bool:
    """Serve until told to stop; ``False`` when the server never started.

    A worker passes the listening ``sockets`` it inherited, ``on_started`` (told once
    the app's startup is done and the server accepts) and ``parent_fd``, a pipe from
    the supervisor whose end of file (the supervisor is gone) stops the worker as
    SIGTERM would, and ``stopped_early``, whether SIGTERM came before uvicorn could
    catch it."""
    import uvicorn

    from governed_memory_service.app import create_app
    from governed_memory_service.authentication import BearerAuthenticator

    manager, key_store, jwt = server_parts(options)
    async with key_store as keys:
        verifiers = (keys,) if jwt is None else (keys, jwt)
        app = create_app(manager, BearerAuthenticator(*verifiers), manage_lifespan=True)
        config = uvicorn.Config(app, host=options.host, port=options.port, lifespan="on",
                                timeout_graceful_shutdown=options.shutdown_timeout,
                                log_level="info", access_log=options.access_log)
        server = uvicorn.Server(config)
        watchers = _watch(server, on_started, parent_fd, stopped_early)
        try:
            await server.serve(sockets=sockets)
        finally:
            for watcher in watchers:
                watcher()
        return bool(server.started)


def _watch(server: Any, on_started: StartedHook | None, parent_fd: int | None,
           stopped_early: Callable[[], bool] | None) -> list[Callable[[], object]]:
    """Start what a worker needs around its server; returns how to undo each."""
    loop = asyncio.get_running_loop()
    undo: list[Callable[[], object]] = []
    if on_started is not None or stopped_early is not None:
        async def announce() -> None:
            # The first pass runs once serve() has installed uvicorn's signal handlers.
            if stopped_early is not None and stopped_early():
                server.should_exit = True
            while not server.started:
                if server.should_exit:
                    return
                await asyncio.sleep(0.02)
            if on_started is not None:
                on_started()

        task = loop.create_task(announce())
        undo.append(task.cancel)
    if parent_fd is not None:
        import os

        def parent_said() -> None:
            try:
                data = os.read(parent_fd, 4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # end of file: the supervisor is gone, stop as on SIGTERM
                loop.remove_reader(parent_fd)
                server.should_exit = True

        loop.add_reader(parent_fd, parent_said)
        undo.append(lambda: loop.remove_reader(parent_fd))
    return undo


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (the ``service`` extra brings it off
    Windows): the server's per-request cost is mostly the event loop and the HTTP
    parser, and uvicorn only picks uvloop itself when it creates the loop, which a
    command that runs the server inside its own ``asyncio`` runner does not let it do."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def stop_requested(signum: int, frame: FrameType | None) -> None:
    """Replaces the default SIGTERM and SIGINT actions while serving: uvicorn handles
    the signal itself and re-raises it on the way out, where it must not kill the
    process (or raise KeyboardInterrupt) after a clean stop."""
