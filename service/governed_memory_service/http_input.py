"""Reading what a request carries: the body under a byte limit, the scope from the path
and query, and the ``If-Match`` and ``Idempotency-Key`` headers.

Every refusal is a library error naming the field (``body``, ``query.limit``,
``If-Match``), so it reaches the caller as the same 422 problem as the library's own.
Nothing a client sends reaches a conversion that could raise anything else: the body is
read by :mod:`~governed_memory_service.json_input` (RFC 8259 JSON, every resource
bounded), and every number in the query string or a header goes through
:func:`ascii_integer` (ASCII digits, never more than twenty converted), the one helper
every route uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from governed_memory import Principal, Scope
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_INT64
from governed_memory.scope import DIMENSIONS
from starlette.requests import Request

from governed_memory_service.bodies import ScopeBody
from governed_memory_service.errors import PayloadTooLargeError, PreconditionFailedError
from governed_memory_service.json_input import parse_json

__all__ = ["SCOPE_PARAMS", "SCOPE_QUERY", "ascii_integer", "content_length", "etag",
           "expected_revision", "idempotency_key", "integer", "query_values", "read_body",
           "read_json", "scope_of", "scopes_of"]

SCOPE_QUERY: tuple[str, ...] = tuple(d for d in DIMENSIONS if d != "tenant_id")
"""The scope dimensions a query string may carry; the tenant is the path's."""
SCOPE_PARAMS: tuple[str, ...] = (*SCOPE_QUERY, "shared")
"""What a scoped route's query string may carry: the dimensions, and ``shared=true``
for a scope without a user even when the credential is bound to one."""


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON (:func:`~governed_memory_service.json_input.parse_json`: RFC
    8259 only, every resource bounded), read by :func:`read_body`."""
    return parse_json(await read_body(request, limit))


async def read_body(request: Request, limit: int) -> bytes:
    """The bytes of a JSON body, refusing it once more than ``limit`` bytes have arrived.

    A ``Content-Length`` over the limit is refused before reading, but the limit is
    enforced on the bytes as they stream in, so a missing or lying length (chunked
    uploads) buys nothing.
    """
    declared = content_length(request)
    if declared is not None and declared > limit:
        raise PayloadTooLargeError(limit)
    content_type = request.headers.get("content-type", "application/json")
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise MemoryValidationError("the body must be application/json", field="body")
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise PayloadTooLargeError(limit)
    return bytes(received)


def content_length(request: Request) -> int | None:
    """The declared ``Content-Length``: ASCII digits only (``str.isdigit`` also takes
    ``²`` and other digits ``int`` refuses). A length too long to be a 64-bit number is
    returned as one past the largest, which every body limit refuses as too large."""
    value = request.headers.get("content-length")
    if value is None:
        return None
    number = ascii_integer(value.strip())
    if number is None:
        raise MemoryValidationError("Content-Length must be a number of bytes",
                                    field="Content-Length")
    return number


def ascii_integer(text: str) -> int | None:
    """A non-negative decimal integer of ASCII digits, capped at ``MAX_INT64 + 1`` (a
    longer string of digits is never converted, so no length of input costs more than
    twenty digits do); ``None`` when ``text`` is not one."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_INT64)):
        return MAX_INT64 + 1
    return min(int(digits), MAX_INT64 + 1)


def query_values(request: Request, allowed: Iterable[str]) -> dict[str, list[str]]:
    """The query string by name, refusing names the route does not take (a misspelt
    scope dimension must not silently widen or change the scope)."""
    allowed_set = set(allowed)
    values: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed_set:
            raise MemoryValidationError(f"unknown query parameter {name!r}",
                                        field=f"query.{name}")
        values.setdefault(name, []).append(value)
    return values


def single(values: dict[str, list[str]], name: str) -> str | None:
    given = values.get(name)
    if not given:
        return None
    if len(given) > 1:
        raise MemoryValidationError(f"{name} may be given once", field=f"query.{name}")
    return given[0]


def scope_of(request: Request, values: dict[str, list[str]], principal: Principal) -> Scope:
    """``/v1/tenants/{tenant}/...?user_id=...&project_id=...``: one exact scope.

    Without ``user_id``, a principal bound to a user works in that user's scope, as
    over MCP and in the tiers: a user's key that leaves ``user_id`` out means its own
    memories, not the tenant's shared scope (where it would find nothing it wrote).
    ``shared=true`` asks for the scope without a user instead (a project's shared
    memories, which the scope rule lets a user read). Naming another user is left to
    the manager's scope rule, which refuses it.
    """
    dimensions: dict[str, object] = {"tenant_id": request.path_params["tenant"]}
    for name in SCOPE_QUERY:
        value = single(values, name)
        if value is not None:
            dimensions[name] = value
    shared = boolean(values, "shared")
    return Scope.from_dimensions(_owned(dimensions, principal, shared, "query.shared"))


def _owned(dimensions: dict[str, object], principal: Principal, shared: bool,
           field: str) -> dict[str, object]:
    """The dimensions with ``user_id`` defaulted to the principal's user, if bound,
    unless the caller asked for the shared scope."""
    if shared:
        if "user_id" in dimensions:
            raise MemoryValidationError("shared names the scope without a user: give "
                                        "shared or user_id, not both", field=field)
        return dimensions
    if "user_id" not in dimensions and principal.user_id is not None:
        return {**dimensions, "user_id": principal.user_id}
    return dimensions


def scopes_of(request: Request, bodies: Sequence[ScopeBody],
              principal: Principal) -> tuple[Scope, ...]:
    """The exact scopes of a multi-scope search, each under the path's tenant, with
    ``user_id`` defaulted as :func:`scope_of` does.

    An empty list is refused here rather than searched as nothing, and a bad dimension
    is named by its place in the body (``body.scopes[1].user_id``).
    """
    if not bodies:
        raise MemoryValidationError("scopes must name at least one scope",
                                    field="body.scopes")
    tenant = request.path_params["tenant"]
    scopes = []
    for index, body in enumerate(bodies):
        dimensions = {k: v for k, v in attrs.asdict(body).items()
                      if v is not None and k != "shared"}
        try:
            scopes.append(Scope.from_dimensions(
                _owned({"tenant_id": tenant, **dimensions}, principal, body.shared,
                       f"body.scopes[{index}].shared")))
        except MemoryValidationError as exc:
            name = (exc.field or "").removeprefix("scope.").removeprefix("scope")
            field = f"body.scopes[{index}]" + (f".{name}" if name else "")
            raise MemoryValidationError(str(exc), field=field) from None
    return tuple(scopes)


def integer(values: dict[str, list[str]], name: str) -> int | None:
    """A number in the query string (``limit``, ``after_seq``): ASCII digits that fit
    in 64 bits, else a 422 on ``query.<name>``. The operation's own range (a page of 1
    to 100) is the library's to check; this only guarantees a number it can check."""
    value = single(values, name)
    if value is None:
        return None
    number = ascii_integer(value)
    if number is None or number > MAX_INT64:
        raise MemoryValidationError(
            f"{name} must be a non-negative integer (ASCII digits, at most {MAX_INT64})",
            field=f"query.{name}")
    return number


def boolean(values: dict[str, list[str]], name: str) -> bool:
    value = single(values, name)
    if value is None:
        return False
    if value not in ("true", "false"):
        raise MemoryValidationError(f"{name} must be true or false", field=f"query.{name}")
    return value == "true"


def etag(revision: str | None) -> dict[str, str]:
    """The ``ETag`` header for a record revision (strong: a revision is exact)."""
    return {} if revision is None else {"ETag": f'"{revision}"'}


def expected_revision(request: Request) -> str | None:
    """The revision ``If-Match`` names; ``None`` when absent or ``*`` (any revision)."""
    value = request.headers.get("if-match")
    if value is None or value.strip() == "*":
        return None
    value = value.strip()
    if "," in value:
        raise MemoryValidationError("If-Match must name one entity tag", field="If-Match")
    if value.startswith("W/"):
        # RFC 9110: If-Match uses the strong comparison, which a weak tag never passes.
        raise PreconditionFailedError("a weak entity tag never matches")
    if len(value) < 3 or not (value.startswith('"') and value.endswith('"')):
        raise MemoryValidationError('If-Match must be a quoted entity tag ("...")',
                                    field="If-Match")
    return value[1:-1]


def idempotency_key(request: Request) -> str | None:
    value = request.headers.get("idempotency-key")
    return None if value is None else value.strip()
