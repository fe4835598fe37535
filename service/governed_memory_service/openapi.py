"""The OpenAPI 3.1 document, built from the same endpoint table the app mounts, so a
route cannot exist without being described."""

from __future__ import annotations

import enum
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs
from governed_memory import __version__
from governed_memory.limits import MAX_INT64

from governed_memory_service.audit_routes import (
    AUDIT_OPERATION_DESCRIPTIONS,
    AUDIT_QUERY_DESCRIPTIONS,
)
from governed_memory_service.routes import ENDPOINTS, Endpoint

__all__ = ["OPERATIONAL_PATHS", "openapi_document", "schema_of"]

OPERATIONAL_PATHS: dict[str, str] = {
    "/healthz": "Liveness: the process answers (no storage round trip)",
    "/readyz": "Readiness: the provider's storage answers (manager.health())",
    "/openapi.json": "This document",
}

_QUERY_DESCRIPTIONS = {
    "limit": ("integer", "page size or sweep bound (default 20; purge-expired 100)"),
    "cursor": ("string", "the previous page's next_cursor"),
    "memory_type": ("string", "only these memory types (repeat the parameter)"),
    "hard": ("boolean", "true erases the record and its history"),
    "shared": ("boolean", "true: the scope without a user (shared memories of a project "
                          "or tenant), even for a credential bound to a user; excludes "
                          "user_id"),
    "after_seq": ("integer", "only the turns after this sequence number"),
    "user_id": ("string", "scope dimension user_id; without it, a credential bound to a "
                          "user means that user (one bound to none: no user_id)"),
    **AUDIT_QUERY_DESCRIPTIONS,
}


def schema_of(kind: Any) -> dict[str, Any]:
    """A JSON Schema for the annotation types the bodies use."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [schema_of(a) for a in typing.get_args(kind) if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"anyOf": options}
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"type": "string", "enum": [m.value for m in kind]}
    if kind is str:
        return {"type": "string"}
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        return {"type": "integer"}
    if kind is float:
        return {"type": "number"}
    if origin is tuple:
        return {"type": "array", "items": schema_of(typing.get_args(kind)[0])}
    if origin is Mapping or kind is Mapping:
        return {"type": "object"}
    if isinstance(kind, type) and attrs.has(kind):
        hints = typing.get_type_hints(kind)
        fields = attrs.fields(kind)
        return {
            "type": "object", "additionalProperties": False,
            "properties": {f.name: schema_of(hints[f.name]) for f in fields},
            "required": [f.name for f in fields if f.default is attrs.NOTHING],
        }
    return {}


_PATH_DESCRIPTIONS = {
    "tenant": "the scope's tenant_id",
    "record_id": "the memory's id",
    "user_id": "the data subject to erase",
    "snapshot_id": "a search result's snapshot_id (looked up in the credential's tenant)",
}


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"},
         "description": _PATH_DESCRIPTIONS.get(name, name)}
        for name in re.findall(r"{(\w+)}", endpoint.path)]
    for name in endpoint.query:
        kind, description = AUDIT_OPERATION_DESCRIPTIONS.get(
            (endpoint.operation_id, name),
            _QUERY_DESCRIPTIONS.get(name, ("string", f"scope dimension {name}")))
        schema: dict[str, Any] = {"type": kind}
        if kind == "integer":  # ASCII digits within 64 bits; the operation bounds it further
            schema.update(minimum=0, maximum=MAX_INT64)
        params.append({"name": name, "in": "query", "required": False,
                       "schema": schema, "description": description})
    for header in endpoint.headers_in:
        params.append({"name": header, "in": "header", "required": False,
                       "schema": {"type": "string"}})
    return params


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    ok: dict[str, Any] = {"description": "success", "content": {"application/json": {}}}
    if endpoint.etag:
        ok["headers"] = {"ETag": {"schema": {"type": "string"},
                                  "description": "the record revision"}}
    responses: dict[str, Any] = {str(endpoint.status): ok}
    for status, why in (("401", "missing or invalid credentials"),
                        ("403", "scope or policy denied"), ("404", "no such record"),
                        ("409", "conflict"), ("412", "If-Match names a stale revision"),
                        ("413", "body over the limit"), ("422", "invalid input, names the field")):
        responses[status] = {"description": why, "content": problem}
    operation: dict[str, Any] = {"operationId": endpoint.operation_id,
                                 "summary": endpoint.summary,
                                 "parameters": _parameters(endpoint),
                                 "responses": responses,
                                 "security": [{"bearer": []}]}
    if endpoint.body is not None:
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": schema_of(endpoint.body)}}}
    return operation


def openapi_document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    for path, summary in OPERATIONAL_PATHS.items():
        paths[path] = {"get": {"operationId": path.strip("/").replace(".", "_"),
                               "summary": summary, "security": [],
                               "responses": {"200": {"description": "ok"}}}}
    paths["/mcp"] = {"post": {
        "operationId": "mcp",
        "summary": "The MCP server over streamable HTTP (JSON-RPC 2.0 messages; tools "
                   "remember, recall, update, forget, list_memories): see docs/service.md",
        "requestBody": {"required": True, "content": {"application/json": {}}},
        "responses": {"200": {"description": "a JSON-RPC response",
                              "content": {"application/json": {}}},
                      **{status: {"description": why, "content": {
                          "application/problem+json": {"schema": {
                              "$ref": "#/components/schemas/Problem"}}}}
                         for status, why in (
                             ("401", "missing or invalid credentials"),
                             ("413", "body over the limit"),
                             ("422", "not JSON within the service's bounds, or not one "
                                     "JSON-RPC 2.0 message; names the field"))}},
        "security": [{"bearer": []}]}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "governed-memory", "version": __version__},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "an API key (gmk_...) or a JWT from the configured issuer"}},
            "schemas": {"Problem": {"type": "object", "properties": {
                "type": {"type": "string"}, "title": {"type": "string"},
                "status": {"type": "integer"}, "detail": {"type": "string"},
                "code": {"type": "string"}, "field": {"type": "string"}}}},
        },
    }
