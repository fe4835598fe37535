"""Every long-term memory request, from one import path, and what they are sent to.

Each request holds its operation's rules (it validates itself, checks and summarizes
what came back, says what governance sets on it and what a trace may see of it), so
the activity port asks and never branches on which request it runs. They are defined by
what they do: :mod:`governed_memory.write_requests` (add, update, delete),
:mod:`governed_memory.read_requests` (get, list, search, history),
:mod:`governed_memory.review_requests` (the review queue),
:mod:`governed_memory.erasure_requests` (a scope, a user, what has expired), on the
bases of :mod:`governed_memory.request_kinds`. Providers, policies, the service and
their tests import them from here, which also holds what spans them all: the
:data:`MemoryRequest` union and :class:`Operations`, what a provider implements.
"""

from __future__ import annotations

from typing import Protocol

from governed_memory.committed_summary import committed_summary
from governed_memory.dedup import DedupMode  # named here too: a request field
from governed_memory.erasure_requests import (
    DeleteAllRequest,
    DeleteUserRequest,
    ErasureTarget,
    PurgeExpiredRequest,
    erasure_evidence,
)
from governed_memory.read_requests import (
    GetRequest,
    HistoryRequest,
    ListRequest,
    ReadTarget,
    SearchRequest,
)
from governed_memory.request_kinds import LongTermRequest
from governed_memory.review_requests import (
    ApproveRequest,
    ListPendingRequest,
    RejectRequest,
    ReviewingProvider,
    ReviewTarget,
)
from governed_memory.write_requests import AddRequest, DeleteRequest, UpdateRequest, WriteTarget

__all__ = [
    "AddRequest",
    "ApproveRequest",
    "DedupMode",
    "DeleteAllRequest",
    "DeleteRequest",
    "DeleteUserRequest",
    "GetRequest",
    "HistoryRequest",
    "ListPendingRequest",
    "ListRequest",
    "MemoryRequest",
    "Operations",
    "PurgeExpiredRequest",
    "RejectRequest",
    "ReviewingProvider",
    "SearchRequest",
    "UpdateRequest",
    "committed_summary",
    "erasure_evidence",
]

_Request = LongTermRequest
"""The base ``governed_memory.lookup`` extends, by the name it had here."""

MemoryRequest = (
    AddRequest | GetRequest | ListRequest | SearchRequest | UpdateRequest | DeleteRequest
    | HistoryRequest | DeleteAllRequest | DeleteUserRequest | PurgeExpiredRequest
    | ApproveRequest | RejectRequest | ListPendingRequest
)


class Operations(WriteTarget, ReadTarget, ErasureTarget, ReviewTarget, Protocol):
    """What the requests are sent to (each request's ``send`` calls one of these): the
    operations of ``governed_memory.provider.MemoryProvider``, which adds its lifecycle,
    capabilities and the other feature accessors. Each request module declares the
    operations its own requests call (``WriteTarget``, ``ReadTarget``, ``ErasureTarget``
    and ``ReviewTarget``, the ``review`` accessor); a provider offers them all, so
    neither the requests nor the provider protocol import the other."""
