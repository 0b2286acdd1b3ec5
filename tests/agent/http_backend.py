"""A small scripted HTTP backend for transport tests (standard library only).

It records every request and answers from a script of (status, body, headers); once the
script is used up it answers 202 like the real backend. `rule`, when set, answers first: a
function of the request body returning (status, body, headers), or None to go on.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScriptedBackend:
    def __init__(self, port: int | None = None, ssl_context: Any = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: deque[tuple[int, Any, dict[str, str]]] = deque()
        self.rule: Callable[[bytes], tuple[int, Any, dict[str, str]] | None] | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                status, answer, headers = backend._answer(self.path, dict(self.headers), body)
                payload = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        self.script.append((status, body if body is not None else {}, headers or {}))

    def _answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, dict]:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
            answer = self.rule(body) if self.rule is not None else None
            if answer is not None:
                return answer
            if self.script:
                return self.script.popleft()
            self._next_id += 1
            return 202, {"id": self._next_id, "status": "pending"}, {}

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests]

    def events_sent(self) -> list[int]:
        """How many events each request carried. A heartbeat by digest (empty body, header
        `X-Atlas-Report-Digest`) carries none: the agent sends one only when it has none."""
        return [len(json.loads(r["body"])["events"]) if r["body"] else 0 for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
