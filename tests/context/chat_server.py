"""A local HTTP server speaking the OpenAI ``/chat/completions`` wire format, for the
adapter tests: it records each request and answers from a queue of replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.replies: list[tuple[int, Any]] = []
        self.delay_s = 0.0
        self.refuse_json_schema = False
        self.url = ""

    def reply(self, content: str, status: int = 200) -> None:
        body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}]}
        self.replies.append((status, body))

    def raw(self, status: int, body: Any) -> None:
        self.replies.append((status, body))


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            import time

            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            server.requests.append({"path": self.path, **body})
            server.headers.append({k.lower(): v for k, v in self.headers.items()})
            if server.delay_s:
                time.sleep(server.delay_s)
            fmt = body.get("response_format") or {}
            if server.refuse_json_schema and fmt.get("type") == "json_schema":
                status, payload = 400, {"error": {"message": "json_schema unsupported"}}
            elif self.path != "/v1/chat/completions":
                status, payload = 404, {"error": {"message": "not found"}}
            elif server.replies:
                status, payload = server.replies.pop(0)
            else:
                status, payload = 500, {"error": {"message": "no reply queued"}}
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    state = ChatServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
