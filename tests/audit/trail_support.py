"""Helpers for the PostgreSQL trail's tests: a profile that records into the provider's
store, a TCP proxy that takes "the database" down and up again for one client, and
readers of what the trail holds."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from governed_memory.audit.stored import StoredTrail
from governed_memory.profiles import loads_profile
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory_native.postgres.trail.reader import PostgresStoredTrail
from postgres_support import POSTGRES_DSN, postgres_config

PROFILE = """
spec_version = 1
id = "pg-audited"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "postgres"

[audit]
fail_closed = true

[audit.sinks.postgres-trail]
store = "provider"
interval_s = 0.05
{extra}
"""


def trail_profile(*, minimal: bool = False, extra: str = "") -> MemoryProfileSpec:
    text = PROFILE.format(extra=extra)
    if minimal:
        text += '\n[privacy]\nevent_detail = "minimal"\n'
    return loads_profile(text)


def store_config(directory: Path) -> dict[str, Any]:
    """The provider's config on the schema private to ``directory``."""
    return postgres_config(directory)


@contextlib.contextmanager
def stored(schema: str, dsn: str = POSTGRES_DSN) -> Iterator[StoredTrail]:
    with PostgresStoredTrail(dsn, schema) as trail:
        yield trail


def trail_events(schema: str) -> list[dict[str, Any]]:
    """The events of the trail's entries, in order."""
    with stored(schema) as trail:
        return [json.loads(entry.event) for entry in trail.entries()]


def duplicates(ids: list[str]) -> list[str]:
    return [event_id for event_id, count in Counter(ids).items() if count > 1]


def execute(schema: str, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={schema}") as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else []


class Proxy:
    """A TCP proxy to PostgreSQL on a port of its own: ``down()`` closes the listener
    and cuts every connection through it (to its clients, the database went away);
    ``up()`` listens again on the same port."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/test"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update({writer, upstream_writer})

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        self._writers.difference_update({writer, upstream_writer})
