"""What a write's committed event says, derived from its result alone.

A provider that stores its committed events with its writes (``event_outbox``) writes
that event itself, from the result it is about to return, before the port sees it; the
event it stores must say exactly what the port's own would. So the summary is not
derived twice: each result type is mapped to the ``summarize`` of the request kind that
answers with it.
"""

from __future__ import annotations

import functools

from governed_memory.erasure_requests import (
    DeleteAllRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
)
from governed_memory.records import CleanupPage, DeleteResult, ErasureReceipt, MemoryRecord
from governed_memory.request import Summary
from governed_memory.request_kinds import DeletionRequest, RecordRequest


def _no_summary(result: object) -> Summary:
    raise TypeError(f"no committed event for a {type(result).__name__} result")


@functools.singledispatch
def committed_summary(result: object) -> Summary:
    """What a write's committed event says about its result: the summary of the request
    kind that answers with it, so an event a provider stores in its outbox
    (``outbox.finish_committed_event``) says what the port's own would."""
    return _no_summary(result)


committed_summary.register(MemoryRecord, RecordRequest.summarize)
committed_summary.register(DeleteResult, DeletionRequest.summarize)
committed_summary.register(ErasureReceipt, DeleteUserRequest.summarize)
committed_summary.register(CleanupPage, PurgeExpiredRequest.summarize)
committed_summary.register(int, DeleteAllRequest.summarize)
committed_summary.register(bool, _no_summary)  # an int, but never a count
