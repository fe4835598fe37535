"""A TCP proxy in front of Redis that a test can cut: refuse connections, drop the open
ones, or swallow traffic (so clients time out) — without touching the Redis server
other tests are using."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlparse


class TcpProxy:
    def __init__(self, upstream_url: str) -> None:
        parsed = urlparse(upstream_url)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 6379
        self.path = parsed.path or "/0"
        self.mode = "forward"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.WriteTransport] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}{self.path}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def refuse(self) -> None:
        """New connections are closed at once and open ones are cut (a stopped server)."""
        self.mode = "refuse"
        for transport in list(self._transports):
            transport.abort()
        self._transports.clear()

    def blackhole(self) -> None:
        """Connections stay open but nothing gets through (a hung server, a partition)."""
        self.mode = "blackhole"

    def restore(self) -> None:
        self.mode = "forward"

    async def close(self) -> None:
        self.refuse()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.mode == "refuse":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.upstream_host,
                                                                 self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        for transport in (writer.transport, up_writer.transport):
            self._transports.add(transport)
        pumps = [asyncio.create_task(self._pump(reader, up_writer)),
                 asyncio.create_task(self._pump(up_reader, writer))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for stream in (writer, up_writer):
                self._transports.discard(stream.transport)
                stream.transport.abort()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(65536):
                if self.mode == "forward":
                    sink.write(data)
                    await sink.drain()
                # blackhole: read and discard, so the peer waits for a reply forever
