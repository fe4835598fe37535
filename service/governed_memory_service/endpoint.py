"""``Endpoint``: one row of the route table that the app mounts, the OpenAPI document
describes and the security tests walk, so no route exists outside the table."""

from __future__ import annotations

from typing import Any

import attrs

from governed_memory_service.http_input import SCOPE_PARAMS

__all__ = ["Endpoint"]


@attrs.frozen(kw_only=True)
class Endpoint:
    """One route as the app mounts it and the OpenAPI document describes it."""

    path: str
    method: str
    operation_id: str
    summary: str
    query: tuple[str, ...] = SCOPE_PARAMS
    body: type[Any] | None = None
    status: int = 200
    headers_in: tuple[str, ...] = ()
    etag: bool = False
