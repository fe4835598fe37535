"""One way into the activity port for every method of the manager's API.

The manager's operations are grouped by who calls them (application code's memory
operations, an operator's store-wide ones); every group builds a typed request and
hands it to the port through :meth:`GovernedCalls._execute`, so no method can skip
starting the manager on first use, or the audited rejection of a request that cannot
even be built. The tiers facade enters the port the same way (:func:`build_request`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from governed_memory.errors import MemoryValidationError
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.principal import Principal
from governed_memory.request import Request

T = TypeVar("T")
Q = TypeVar("Q")


class GovernedCalls:
    """The base of each group of operations: its port, and the call into it."""

    activity: ActivityPort

    async def _ready(self) -> None:
        """Have everything an operation needs running (the manager starts on first use)."""
        raise NotImplementedError  # pragma: no cover - the manager overrides

    async def _execute(self, operation: Operation, principal: Principal,
                       build: Callable[[], Request[T]]) -> T:
        await self._ready()
        request = await build_request(self.activity, operation, principal, build)
        return await self.activity.execute(request, principal)


async def build_request(port: ActivityPort, operation: Operation, principal: Principal,
                        build: Callable[[], Q]) -> Q:
    """Build the request for one call, so a bad argument is still an audited operation.

    A request that cannot be built (a wrong type, an out-of-range value) is recorded by
    ``port`` as a rejected ``operation`` of ``principal`` before the typed validation error
    is raised; a caller that is not a ``Principal`` cannot be audited and is refused
    outright. The manager and the tiers facade both enter the port this way.
    """
    if not isinstance(principal, Principal):
        raise MemoryValidationError("principal must be a Principal from authenticated "
                                    "context", field="principal")
    try:
        return build()
    except MemoryValidationError as exc:
        await port.reject_invalid(operation, principal, exc)
        raise
    except (TypeError, ValueError) as exc:
        error = MemoryValidationError(f"invalid {operation.value} request: {exc}",
                                      field=operation.value)
        await port.reject_invalid(operation, principal, error)
        raise error from None
