"""``governed-memory serve``: the HTTP API under uvicorn, with a graceful SIGTERM.

The manager comes from a profile the way the data commands build theirs (the same
``--db`` override and the same audit trail under the database's directory), so what a
served request does is what ``governed-memory add`` would have done. The app owns the
manager's lifespan: uvicorn's shutdown stops accepting, lets requests in flight finish
(at most ``--shutdown-timeout`` seconds), and only then runs the lifespan shutdown that
closes the manager; an acknowledged write was committed before its response was sent,
so none is lost. uvicorn re-raises the captured signal once it is done, which would
turn a clean stop into death by SIGTERM; the command keeps its own handler installed so
that a requested stop exits 0.

Starlette, uvicorn and PyJWT (the ``service`` extra) are imported inside the command
only, so loading plugins never needs them.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
import click

from governed_memory_service.command_files import keys_option

EXTRA_HINT = "pip install 'governed-memory[service]'"
_EXTRA_MODULES = ("starlette", "uvicorn", "jwt", "httpx", "mcp")


@attrs.frozen(kw_only=True)
class ServeOptions:
    profile: str
    db: Path | None
    keys: Path | None
    host: str
    port: int
    shutdown_timeout: int
    access_log: bool = False


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
                  also_creates: tuple[tuple[str, Path], ...] = ()) -> Any:
    """The manager ``profile`` builds: a registered ``id@version`` or a TOML file, over
    ``db``, with the CLI's audit trail. The CLI's own construction
    (:func:`governed_memory.cli.building.build_manager`), so a served request does what
    ``governed-memory add`` would.

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
    return build(profile, db, plugins=plugins)


def authenticating_jwt(manager: Any) -> Any:
    """The JWT verifier the manager's profile declares (``[auth.jwt]``), or ``None``;
    its key is read here, so a missing one stops the server before it listens."""
    from governed_memory_service.jwt_bearer import JwtSettings, JwtVerifier

    spec = manager.profile_spec
    if spec is None or spec.auth.jwt is None:
        return None
    return JwtVerifier(JwtSettings.from_profile(spec.auth.jwt))


async def _serve(options: ServeOptions) -> bool:
    """Serve until told to stop; ``False`` when the server never started."""
    import uvicorn

    from governed_memory_service.api_keys import ApiKeyStore, default_key_store_path
    from governed_memory_service.app import create_app
    from governed_memory_service.authentication import BearerAuthenticator

    key_store = options.keys or default_key_store_path()
    manager = build_manager(options.profile, options.db,
                            also_creates=(("the key store", key_store),))
    jwt = authenticating_jwt(manager)
    async with ApiKeyStore(key_store) as keys:
        verifiers = (keys,) if jwt is None else (keys, jwt)
        app = create_app(manager, BearerAuthenticator(*verifiers), manage_lifespan=True)
        config = uvicorn.Config(app, host=options.host, port=options.port, lifespan="on",
                                timeout_graceful_shutdown=options.shutdown_timeout,
                                log_level="info", access_log=options.access_log)
        server = uvicorn.Server(config)
        await server.serve()
        return bool(server.started)


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


def _stop_requested(signum: int, frame: FrameType | None) -> None:
    """Replaces the default SIGTERM and SIGINT actions while serving: uvicorn handles
    the signal itself and re-raises it on the way out, where it must not kill the
    process (or raise KeyboardInterrupt) after a clean stop."""


@click.command("serve")
@click.option("--profile", required=True, metavar="ID@VERSION|FILE",
              help="the profile that builds the manager: a registered reference or a "
                   "TOML file")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite database file (overrides the profile provider's path)")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--shutdown-timeout", type=click.IntRange(min=0), default=30,
              show_default=True,
              help="seconds requests in flight get to finish after SIGTERM")
@click.option("--access-log/--no-access-log", default=False, show_default=True,
              help="a line per request on stderr; off by default, since a request's URL "
                   "names the data subject (user_id and the other scope dimensions)")
@keys_option
def serve(profile: str, db: Path | None, keys: Path | None, host: str, port: int,
          shutdown_timeout: int, access_log: bool) -> None:
    """Run the HTTP API; SIGTERM (or Ctrl-C) stops it gracefully (exit 0)."""
    require_service_extra()
    from governed_memory.cli.common import EXIT_CODES
    from governed_memory.errors import GovernedMemoryError

    options = ServeOptions(profile=profile, db=db, keys=keys, host=host, port=port,
                           shutdown_timeout=shutdown_timeout, access_log=access_log)
    previous = {sig: signal.signal(sig, _stop_requested)
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            started = runner.run(_serve(options))
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        sys.exit(EXIT_CODES.get(exc.code, 1))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not started:
        click.echo("error: the server did not start", err=True)
        sys.exit(1)
