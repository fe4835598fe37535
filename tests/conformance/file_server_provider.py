"""A provider whose storage lives outside the instance, the way Redis or a database does,
for the ``governed-memory conformance`` front-door tests.

The "server" is a directory; each namespace is one JSON file in it, read on ``start``
and written on ``close``, so instances configured with the same namespace share
storage exactly as two clients of one Redis with one key prefix do. Records, versions
and idempotency results are stored in the plain JSON form of the framework's strict
converter (``governed_memory.converter``), the way an out-of-process provider stores
them. ``dispose_storage`` is the cleanup hook: it removes the instance's namespace.

It is registered through a generated entry point (``register_for_subprocess``) so a
subprocess of the installed console script can load it like any third-party plugin.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from example_provider import ExampleProvider, Stored
from governed_memory import DeleteResult, MemoryRecord, MemoryVersion, hookimpl
from governed_memory.capabilities import Capabilities
from governed_memory.clock import Clock
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryConfigurationError

NAME = "file-server"


class FileServerProvider(ExampleProvider):
    name = NAME

    def __init__(self, clock: Clock, server: Path, namespace: str) -> None:
        super().__init__(clock)
        self._file = server / f"{namespace}.json"
        self._disposed = False

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), durable=True)

    async def start(self) -> None:
        if self._file.exists():
            body = json.loads(self._file.read_text(encoding="utf-8"))
            self._rows = {row_id: Stored(structure(row["record"], MemoryRecord),
                                         [structure(v, MemoryVersion) for v in row["versions"]])
                          for row_id, row in body["rows"].items()}
            self._replies = {tuple(slot): (fingerprint, _result(value))
                             for slot, fingerprint, value in body["replies"]}

    async def close(self) -> None:
        if self._disposed:
            return
        body = {
            "rows": {row_id: {"record": unstructure(row.record),
                              "versions": [unstructure(v) for v in row.versions]}
                     for row_id, row in self._rows.items()},
            "replies": [[list(slot), fingerprint,
                         {"kind": type(value).__name__, "value": unstructure(value)}]
                        for slot, (fingerprint, value) in self._replies.items()],
        }
        self._file.write_text(json.dumps(body), encoding="utf-8")

    async def dispose_storage(self) -> None:
        """The cleanup hook: remove this instance's namespace from the server."""
        self._file.unlink(missing_ok=True)
        self._disposed = True


def _result(stored: Mapping[str, Any]) -> Any:
    kind = {"MemoryRecord": MemoryRecord, "DeleteResult": DeleteResult}[stored["kind"]]
    return structure(stored["value"], kind)


def build_file_server_provider(config: Mapping[str, Any], clock: Clock) -> FileServerProvider:
    unknown = set(config) - {"server", "namespace"}
    if unknown or not isinstance(config.get("server"), str) or not config.get("namespace"):
        raise MemoryConfigurationError(
            "file-server config: 'server' (a directory) and 'namespace' are required, "
            f"nothing else{f'; unknown: {sorted(unknown)}' if unknown else ''}")
    return FileServerProvider(clock, Path(config["server"]), str(config["namespace"]))


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    register(NAME, build_file_server_provider, description="JSON files as a shared server")


def register_for_subprocess(site: Path) -> None:
    """Make ``site`` (put it on ``PYTHONPATH``) hold a distribution whose
    ``governed_memory`` entry point is this module, so a plain subprocess loads it."""
    info = site / "file_server_plugin-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(textwrap.dedent("""\
        Metadata-Version: 2.1
        Name: file-server-plugin
        Version: 0.1
    """), encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[governed_memory]\nfile-server = file_server_provider\n", encoding="utf-8")
