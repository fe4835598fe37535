"""Long-term requests by what answers them: one record, a page of records, a deletion.

What a provider returned is checked by the kind of value it is, not by the operation
that asked for it: a record of another scope is a violation whether an add, an update
or an approve returned it. So the check and the summary of each kind of answer are
written once, in the base its requests share, and a request module holds only what is
its operation's own.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING, ClassVar, TypeVar

from governed_memory.errors import MemoryNotFoundError, MemoryStorageError, MemoryValidationError
from governed_memory.records import DeleteResult, MemoryRecord, Page
from governed_memory.request import Checked, Request, Summary, wrong_result
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext

ResultT = TypeVar("ResultT")


class LongTermRequest(Request[ResultT]):
    """A long-term memory operation: its scope (or scopes) checked by type before its
    own limits (``_validate``), and its result checked by the kind of value it is."""

    __slots__ = ()

    def validate(self) -> None:
        self._check_scope_types()
        self._validate()

    def _check_scope_types(self) -> None:
        """Its scope is a ``Scope`` (a request over several checks its ``scopes``)."""
        if hasattr(self, "scope") and not isinstance(getattr(self, "scope"), Scope):  # noqa: B009
            raise MemoryValidationError("scope must be a Scope", field="scope")

    def _validate(self) -> None:  # pragma: no cover - every request overrides
        raise NotImplementedError


def owned(record: MemoryRecord, allowed: Set[str]) -> bool:
    """Whether ``record`` belongs to one of the ``allowed`` scopes, by the hash it
    carries and by the hash of the scope it names."""
    return record.scope_hash in allowed and record.scope.scope_hash == record.scope_hash


class RecordRequest(LongTermRequest[MemoryRecord]):
    """An operation answered by one record: a write's (add, update, approve) or a
    read's (``reading``: get)."""

    __slots__ = ()

    reading: ClassVar[bool] = False

    def check(self, result: MemoryRecord, allowed: Set[str],
              ctx: OperationContext) -> Checked[MemoryRecord]:
        """Of another scope, the record is a violation and nothing is returned (a read
        answers "not found", a write reports a storage error); a read also hides a
        record that is not visible now."""
        if not isinstance(result, MemoryRecord):
            return wrong_result(self, result)
        if not owned(result, allowed):
            error = (MemoryNotFoundError("no such record in this scope") if self.reading
                     else MemoryStorageError("provider returned a record of another scope"))
            return Checked(result, stray=(result.id,), error=error)
        if self.reading and not result.is_visible(ctx.now):
            return Checked(result, error=MemoryNotFoundError("no such record in this scope"))
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: MemoryRecord) -> Summary:
        return Summary(record_ids=(result.id,), versions=(result.version,),
                       content_hashes=(result.content_hash,), count=1)


class PageRequest(LongTermRequest[Page[MemoryRecord]]):
    """An operation answered by a page of records (list, the review queue)."""

    __slots__ = ()

    def shows(self, record: MemoryRecord, now: float) -> bool:
        """Whether the operation shows ``record`` at ``now`` (a list, what is visible;
        the review queue, what waits for review)."""
        raise NotImplementedError  # pragma: no cover - every page request overrides

    def check(self, result: Page[MemoryRecord], allowed: Set[str],
              ctx: OperationContext) -> Checked[Page[MemoryRecord]]:
        """Records of another scope are reported and left out; records the operation
        does not show (expired, pending) are left out silently."""
        if not isinstance(result, Page):
            return wrong_result(self, result)
        stray = tuple(r.id for r in result.items if not owned(r, allowed))
        page = Page(tuple(r for r in result.items
                          if owned(r, allowed) and self.shows(r, ctx.now)),
                    result.next_cursor)
        return Checked(page, self.summarize(page), stray)

    @classmethod
    def summarize(cls, result: Page[MemoryRecord]) -> Summary:
        return Summary(record_ids=tuple(r.id for r in result.items),
                       versions=tuple(r.version for r in result.items),
                       count=len(result.items))


class DeletionRequest(LongTermRequest[DeleteResult]):
    """An operation that removes one record (delete, reject)."""

    __slots__ = ()

    def check(self, result: DeleteResult, allowed: Set[str],
              ctx: OperationContext) -> Checked[DeleteResult]:
        if not isinstance(result, DeleteResult):
            return wrong_result(self, result)
        if result.scope_hash not in allowed:
            return Checked(result, stray=(result.record_id,),
                           error=MemoryStorageError("provider deleted in another scope"))
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: DeleteResult) -> Summary:
        return Summary(record_ids=(result.record_id,),
                       versions=() if result.version is None else (result.version,), count=1)
