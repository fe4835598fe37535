"""``governed-memory serve``, the command: one process (:mod:`serve`) or a supervising
parent over N worker processes (:mod:`workers`), both built on :mod:`serve`, so neither
of them needs to know the other."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from governed_memory_service.command_files import keys_option
from governed_memory_service.serve import (
    DEFAULT_LISTEN_MODE,
    DEFAULT_MAINTAIN_EVERY_S,
    DEFAULT_MAX_RESTARTS,
    DEFAULT_RESTART_WINDOW_S,
    LISTEN_MODES,
    ListenMode,
    ServeOptions,
    event_loop_factory,
    require_service_extra,
    serve_app,
    stop_requested,
)
from governed_memory_service.workers import supervise


@click.command("serve")
@click.option("--profile", required=True, metavar="ID@VERSION|FILE",
              help="the profile that builds the manager: a registered reference or a "
                   "TOML file")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite database file (overrides the profile provider's path)")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--workers", type=click.IntRange(1, 256), default=1, show_default=True,
              help="worker processes on one port, each with its own manager, under a "
                   "supervising parent; 1 serves in this process")
@click.option("--shutdown-timeout", type=click.IntRange(min=0), default=30,
              show_default=True,
              help="seconds requests in flight get to finish after SIGTERM")
@click.option("--max-restarts", type=click.IntRange(min=0), default=DEFAULT_MAX_RESTARTS,
              show_default=True,
              help="with --workers > 1: worker exits the parent restarts within "
                   "--restart-window before it stops everything as a crash loop")
@click.option("--restart-window", type=click.IntRange(min=1),
              default=DEFAULT_RESTART_WINDOW_S, show_default=True, metavar="SECONDS",
              help="with --workers > 1: the window --max-restarts counts in")
@click.option("--listen-mode", type=click.Choice(LISTEN_MODES), default=DEFAULT_LISTEN_MODE,
              show_default=True,
              help="with --workers > 1: a SO_REUSEPORT socket per worker (Linux spreads "
                   "connections over them by a hash of the client's address) or one "
                   "socket every worker accepts from (shared: the first worker awake "
                   "takes a burst of connections)")
@click.option("--maintain-every", "maintain_every", type=click.FloatRange(min=0),
              default=DEFAULT_MAINTAIN_EVERY_S, show_default=True, metavar="SECONDS",
              help="seconds between maintenance rounds in each server process: retrieval "
                   "snapshots past retention, then expired records of every scope in "
                   "bounded, governed batches; 0: none (run `governed-memory worker`)")
@click.option("--access-log/--no-access-log", default=False, show_default=True,
              help="a line per request on stderr; off by default, since a request's URL "
                   "names the data subject (user_id and the other scope dimensions)")
@keys_option
def serve(profile: str, db: Path | None, keys: str | None, host: str, port: int,
          workers: int, shutdown_timeout: int, max_restarts: int, restart_window: int,
          listen_mode: ListenMode, maintain_every: float, access_log: bool) -> None:
    """Run the HTTP API; SIGTERM (or Ctrl-C) stops it gracefully (exit 0)."""
    require_service_extra()
    from governed_memory.cli.common import EXIT_CODES
    from governed_memory.errors import GovernedMemoryError

    options = ServeOptions(profile=profile, db=db, keys=keys, host=host, port=port,
                           shutdown_timeout=shutdown_timeout, access_log=access_log,
                           workers=workers, listen_mode=listen_mode,
                           max_restarts=max_restarts, restart_window_s=restart_window,
                           maintain_every_s=maintain_every)
    if workers > 1:
        sys.exit(supervise(options))
    previous = {sig: signal.signal(sig, stop_requested)
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            started = runner.run(serve_app(options))
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        sys.exit(EXIT_CODES.get(exc.code, 1))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not started:
        click.echo("error: the server did not start", err=True)
        sys.exit(1)
