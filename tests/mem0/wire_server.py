"""A local stand-in for the Mem0 Platform, speaking its wire contract over real HTTP.

It serves what ``mem0.MemoryClient`` 2.2.1 sends (see the mem0 notes): token auth with
the ``Mem0-User-ID`` header, ``/v1/ping/``, ``/v3/memories/add/`` (synchronous with
``infer=false``, queued otherwise), ``/v3/memories/search/``, paginated
``/v3/memories/``, and ``/v1/memories/{id}/`` get, update, delete and history; errors
carry ``detail`` with the Platform's status codes. Like the Platform it ignores ids it
does not own by design: it has no notion of a governed scope, and ``"*"`` in a filter
matches every value, which is what makes the wildcard hazard reproducible here.

Tests script faults with ``fail_next``: a status code, or ``"apply_then_hang"`` /
``"hang"`` to make a write time out after (or without) applying it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from governed_memory_mem0.embedding import HashingEmbedder

ENTITY_IDS = ("user_id", "agent_id", "run_id", "app_id")


class WireState:
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.memories: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.faults: list[tuple[str, str | int, float]] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.embedder = HashingEmbedder(256)

    def fail_next(self, path_part: str, fault: str | int, hang_s: float = 3.0) -> None:
        with self.lock:
            self.faults.append((path_part, fault, hang_s))

    def take_fault(self, path: str) -> tuple[str | int, float] | None:
        with self.lock:
            for index, (part, fault, hang) in enumerate(self.faults):
                if part in path:
                    del self.faults[index]
                    return fault, hang
        return None

    def texts(self) -> list[str]:
        """Every text the server still holds, live or in history (erasure evidence)."""
        with self.lock:
            live = [m["memory"] for m in self.memories.values()]
            past = [t for rows in self.history.values() for row in rows
                    for t in (row["old_memory"], row["new_memory"]) if t]
        return live + past


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _matches(memory: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    for name, wanted in filters.items():
        if name in ("AND", "OR", "NOT"):
            return False  # not needed by the adapter; refuse rather than guess
        actual = memory.get(name) if name in ENTITY_IDS else memory["metadata"].get(name)
        if wanted == "*":
            if actual is None:
                return False
            continue
        if actual != wanted:
            return False
    return True


def _public(memory: Mapping[str, Any], score: float | None = None) -> dict[str, Any]:
    item = {k: memory.get(k) for k in ("id", "memory", "user_id", "agent_id", "app_id",
                                       "run_id", "metadata", "created_at", "updated_at",
                                       "expiration_date")}
    item["categories"] = []
    if score is not None:
        item["score"] = score
    return item


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    # -- plumbing ---------------------------------------------------------------------

    def _send(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        data = json.loads(self.rfile.read(length))
        return data if isinstance(data, dict) else {}

    def _authorized(self) -> bool:
        state = self.server.state
        key = state.api_key
        ok = (self.headers.get("Authorization") == f"Token {key}"
              and self.headers.get("Mem0-User-ID") == hashlib.md5(key.encode()).hexdigest())
        if not ok:
            self._send(401, {"detail": "Invalid API key"})
        return ok

    def _dispatch(self, method: str) -> None:
        state = self.server.state
        url = urlparse(self.path)
        state.requests.append((method, url.path, dict(self.headers)))
        if not self._authorized():
            return
        body = self._body() if method in ("POST", "PUT") else {}
        fault = state.take_fault(f"{method} {url.path}")
        if isinstance(fault, tuple) and isinstance(fault[0], int):
            status = fault[0]
            headers = {"Retry-After": "1"} if status == 429 else None
            self._send(status, {"detail": f"scripted {status}"}, headers)
            return
        if fault is not None and fault[0] == "hang":
            time.sleep(fault[1])
            return
        status, reply = self._route(method, url.path, parse_qs(url.query), body)
        if fault is not None and fault[0] == "apply_then_hang":
            time.sleep(fault[1])  # applied; the client gives up before the answer
            return
        self._send(status, reply)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- the contract -----------------------------------------------------------------

    def _route(self, method: str, path: str, query: Mapping[str, list[str]],
               body: dict[str, Any]) -> tuple[int, Any]:
        state = self.server.state
        parts = [p for p in path.split("/") if p]
        if method == "GET" and parts == ["v1", "ping"]:
            return 200, {"org_id": "org-test", "project_id": "proj-test",
                         "user_email": "wire@example.invalid"}
        if method == "POST" and parts == ["v3", "memories", "add"]:
            return self._add(body)
        if method == "POST" and parts == ["v3", "memories", "search"]:
            return self._search(body)
        if method == "POST" and parts == ["v3", "memories"]:
            return self._get_all(body, query)
        if parts[:2] == ["v1", "memories"] and len(parts) == 2 and method == "DELETE":
            filters = {k: v[0] for k, v in query.items() if k in ENTITY_IDS}
            if not filters:
                return 400, {"detail": "at least one entity id is required"}
            with state.lock:
                doomed = [i for i, m in state.memories.items() if _matches(m, filters)]
                for memory_id in doomed:
                    del state.memories[memory_id]
                    state.history.pop(memory_id, None)
            return 200, {"message": "Memories deleted successfully!"}
        if parts[:2] == ["v1", "memories"] and len(parts) in (3, 4):
            return self._one(method, parts[2], history=len(parts) == 4, body=body)
        return 404, {"detail": "Not found."}

    def _add(self, body: dict[str, Any]) -> tuple[int, Any]:
        state = self.server.state
        owners = {k: body[k] for k in ENTITY_IDS if body.get(k)}
        if not owners:
            return 400, {"detail": "One of user_id, agent_id, run_id or app_id is required"}
        messages = body.get("messages")
        if not isinstance(messages, list):
            return 400, {"detail": "messages must be a list"}
        metadata = body.get("metadata") or {}
        results = []
        with state.lock:
            for message in messages:
                if message.get("role") == "system" or not message.get("content"):
                    continue
                memory_id = str(uuid.uuid4())
                now = _now()
                state.memories[memory_id] = {
                    "id": memory_id, "memory": message["content"], **owners,
                    "metadata": json.loads(json.dumps(metadata)), "created_at": now,
                    "updated_at": now, "expiration_date": body.get("expiration_date"),
                }
                state.history[memory_id] = [{
                    "id": str(uuid.uuid4()), "memory_id": memory_id, "old_memory": None,
                    "new_memory": message["content"], "event": "ADD", "created_at": now,
                    "updated_at": now, "is_deleted": False}]
                results.append({"id": memory_id, "data": {"memory": message["content"]},
                                "event": "ADD"})
        reply: dict[str, Any] = {"event_id": str(uuid.uuid4()), "status": "PENDING"}
        if body.get("infer") is False:
            reply.update(status="SUCCEEDED", results=results)
        return 200, reply

    def _search(self, body: dict[str, Any]) -> tuple[int, Any]:
        state = self.server.state
        if any(k in body for k in ENTITY_IDS):
            return 400, {"detail": "Top-level entity ids are not supported; use filters"}
        filters = body.get("filters") or {}
        if not any(k in filters for k in ENTITY_IDS):
            return 400, {"detail": "filters must contain an entity id"}
        query = state.embedder.embed_one(str(body.get("query", "")))
        threshold = float(body.get("threshold", 0.3))
        top_k = int(body.get("top_k", 10))
        with state.lock:
            scored = []
            for memory in state.memories.values():
                if not _matches(memory, filters):
                    continue
                vector = state.embedder.embed_one(memory["memory"])
                score = sum(a * b for a, b in zip(query, vector, strict=True))
                if score >= threshold:
                    scored.append((score, memory))
        scored.sort(key=lambda pair: -pair[0])
        return 200, {"results": [_public(m, s) for s, m in scored[:top_k]]}

    def _get_all(self, body: dict[str, Any],
                 query: Mapping[str, list[str]]) -> tuple[int, Any]:
        state = self.server.state
        filters = body.get("filters") or {}
        if not any(k in filters for k in ENTITY_IDS):
            return 400, {"detail": "filters must contain an entity id"}
        page = int(query.get("page", ["1"])[0])
        size = int(query.get("page_size", ["100"])[0])
        with state.lock:
            found = sorted((m for m in state.memories.values() if _matches(m, filters)),
                           key=lambda m: (m["created_at"], m["id"]))
        chunk = found[(page - 1) * size: page * size]
        more = page * size < len(found)
        return 200, {"count": len(found),
                     "next": f"/v3/memories/?page={page + 1}&page_size={size}" if more else None,
                     "previous": None if page == 1 else f"/v3/memories/?page={page - 1}",
                     "results": [_public(m) for m in chunk]}

    def _one(self, method: str, memory_id: str, *, history: bool,
             body: dict[str, Any]) -> tuple[int, Any]:
        state = self.server.state
        with state.lock:
            memory = state.memories.get(memory_id)
            if memory is None:
                return 404, {"detail": "Memory not found"}
            if history and method == "GET":
                return 200, list(state.history.get(memory_id, []))
            if method == "GET":
                return 200, _public(memory)
            now = _now()
            if method == "PUT":
                old = memory["memory"]
                if "text" in body and body["text"] is not None:
                    memory["memory"] = body["text"]
                if isinstance(body.get("metadata"), dict):
                    memory["metadata"] = {**memory["metadata"], **body["metadata"]}
                memory["updated_at"] = now
                state.history[memory_id].append({
                    "id": str(uuid.uuid4()), "memory_id": memory_id, "old_memory": old,
                    "new_memory": memory["memory"], "event": "UPDATE", "created_at": now,
                    "updated_at": now, "is_deleted": False})
                return 200, _public(memory)
            if method == "DELETE":
                del state.memories[memory_id]
                state.history.pop(memory_id, None)
                return 200, {"message": "Memory deleted successfully!"}
        return 405, {"detail": "Method not allowed"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: WireState


class WireServer:
    """The server on 127.0.0.1 in a daemon thread."""

    def __init__(self, api_key: str) -> None:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.state = WireState(api_key)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def state(self) -> WireState:
        return self._httpd.state

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
