"""The remote clients declare the in-process signatures: each operation takes what the
manager's (the tiers', the memory blocks', the context builder's) method takes after the
principal, with the same names, kinds, defaults and annotations, so an IDE and a type
checker see the same arguments in process and over HTTP; and the async and the sync
client are one surface."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.tiers import MemoryBlocks, MemoryTiers
from governed_memory.turncontext import MemoryContextBuilder
from governed_memory_service import AsyncMemoryClient, MemoryClient

IN_PROCESS: dict[str, Callable[..., Any]] = {
    **{name: getattr(GovernedMemoryManager, name) for name in (
        "add", "put", "list", "search", "update", "delete", "history", "delete_all",
        "delete_user", "purge_expired", "list_pending", "approve", "reject", "replay",
        "remember")},
    **{name: getattr(MemoryTiers, name) for name in (
        "append", "recent", "turns_after", "working_state", "clear_working")},
    "update_working_state": MemoryTiers.update,
    "build_context": MemoryContextBuilder.build,
    "read_blocks": MemoryBlocks.read,
    "append_block": MemoryBlocks.append,
    "replace_block": MemoryBlocks.replace,
    "rethink_block": MemoryBlocks.rethink,
    "block_history": MemoryBlocks.history,
}
"""Not here, as the routes offer less: ``get`` (by id, not by key) and ``clear``
(always with the session's summary)."""


def _operations(kind: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(kind).items()
            if not name.startswith("_") and name not in {"aclose", "close"}}


def _params(signature: inspect.Signature, skip: int) -> list[tuple[str, object, object, object]]:
    return [("scope" if p.name == "owner" else p.name, p.kind, p.default, p.annotation)
            for p in list(signature.parameters.values())[skip:]]


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_a_client_operation_takes_the_in_process_arguments(name: str) -> None:
    in_process = _params(inspect.signature(IN_PROCESS[name]), 2)  # self, principal
    for client in (AsyncMemoryClient, MemoryClient):
        assert _params(inspect.signature(getattr(client, name)), 1) == in_process, (
            client.__name__)


def test_the_two_clients_have_one_surface() -> None:
    remote, local = _operations(AsyncMemoryClient), _operations(MemoryClient)
    assert set(remote) == set(local) >= set(IN_PROCESS) | {"get", "clear"}
    for name, signature in remote.items():
        assert signature == local[name], name
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(MemoryClient, name)), name
        assert getattr(MemoryClient, name).__name__ == name
