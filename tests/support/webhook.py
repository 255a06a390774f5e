"""A local HTTP/1.1 server with keep-alive that records the requests it receives (a webhook target).

Keep-alive matters: an async HTTP client reuses its pooled connection across requests, which is
what breaks when each call runs on a different event loop.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.connections: set[tuple[str, int]] = set()
        self._changed = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with hook._changed:
                    hook.received.append(body)
                    hook.connections.add(self.client_address)
                    hook._changed.notify_all()
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
