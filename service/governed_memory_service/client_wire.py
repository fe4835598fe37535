"""What the remote clients send and read, apart from which operation it is: one HTTP
request (:class:`Call`), what its response carries (:class:`Reply`: a value, or the
typed error its problem document names), and the two joined as one operation
(:class:`RemoteOperation`, declared with :func:`replies`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

import attrs
import httpx
from governed_memory.converter import structure
from governed_memory.errors import GovernedMemoryError

from governed_memory_service.problems import error_from_problem

__all__ = ["Call", "RemoteOperation", "Reply", "replies"]

P = ParamSpec("P")
T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Call:
    """One HTTP request, built once and sent by either client."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: Any = None
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Reply(Generic[T]):
    """What a response carries: a value of ``kind``, or with ``field`` the one named
    field of its JSON object (``{"deleted": 3}``). An error response raises the typed
    error its problem names. ``derived`` names keys the server adds for readers of the
    JSON that the value computes itself (a block's ``chars``): left out before the
    strict converter reads the object (or each object of a list)."""

    kind: type[T]
    field: str | None = None
    derived: tuple[str, ...] = ()

    def read(self, response: httpx.Response) -> T:
        if not response.is_success:
            raise _error(response)
        data = response.json()
        if self.field is not None:
            data = data.get(self.field) if isinstance(data, dict) else None
        if self.derived:
            data = _without(data, self.derived)
        return structure(data, self.kind)


def _without(data: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_without(item, keys) for item in data]
    return data


class RemoteOperation(Generic[P, T]):
    """One operation: called with its arguments, the request they make; ``reply``
    reads the response."""

    def __init__(self, request: Callable[P, Call], reply: Reply[T]) -> None:
        self.request = request
        self.reply = reply
        self.__name__ = request.__name__
        self.__doc__ = request.__doc__

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        return self.request(*args, **kwargs)


def replies(kind: type[T], *, field: str | None = None, derived: tuple[str, ...] = ()
            ) -> Callable[[Callable[P, Call]], RemoteOperation[P, T]]:
    """Declare a request builder an operation whose response carries ``kind``."""

    def operation(request: Callable[P, Call]) -> RemoteOperation[P, T]:
        return RemoteOperation(request, Reply(kind, field, derived))

    return operation


def _error(response: httpx.Response) -> GovernedMemoryError:
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    return error_from_problem(response.status_code,
                              problem if isinstance(problem, dict) else {})
